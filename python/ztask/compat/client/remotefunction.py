"""Functions that run on a view when called: @remote and @parallel."""

import functools

__all__ = ["remote", "parallel", "RemoteFunction", "ParallelFunction"]


class RemoteFunction:
    """Calling it runs the function on its view (apply)."""

    def __init__(self, view, f, block=None, **flags):
        self.view = view
        self.func = f
        self.block = block
        self.flags = flags
        functools.update_wrapper(self, f)
        self.__doc__ = "RemoteFunction of %s on %r.\n\n%s" % (getattr(f, "__name__", "f"), view, f.__doc__ or "")

    def __call__(self, *args, **kwargs):
        block = self.view.block if self.block is None else self.block
        with self.view.temp_flags(**self.flags):
            ar = self.view.apply_async(self.func, *args, **kwargs)
        return ar.get() if block else ar


class ParallelFunction(RemoteFunction):
    """Calling it (or its .map) maps the function over sequences on its
    view."""

    def __init__(self, view, f, dist="b", block=None, ordered=True, **flags):
        super().__init__(view, f, block=block, **flags)
        self.ordered = ordered
        self.__doc__ = "ParallelFunction of %s on %r.\n\n%s" % (getattr(f, "__name__", "f"), view, f.__doc__ or "")

    def map(self, *sequences):
        block = self.view.block if self.block is None else self.block
        with self.view.temp_flags(**self.flags):
            ar = self.view.map_async(self.func, *sequences)
        return ar.get() if block else ar

    __call__ = map


def remote(view, block=None, **flags):
    """@remote(view): calling the function runs it on the view."""
    return lambda f: RemoteFunction(view, f, block=block, **flags)


def parallel(view, dist="b", block=None, ordered=True, **flags):
    """@parallel(view): calling the function maps it on the view."""
    return lambda f: ParallelFunction(view, f, dist=dist, block=block, ordered=ordered, **flags)
