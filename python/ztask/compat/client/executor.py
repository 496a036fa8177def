"""A view as a concurrent.futures.Executor, and lazy maps (imap)."""

import collections
import concurrent.futures

from .metadata import result_error

__all__ = ["ViewExecutor", "LazyMapIterator", "IMapIterator"]


class LazyMapIterator:
    """Iterates over a map's results as they come (in order)."""

    def __init__(self, amr):
        self._amr = amr
        self._it = iter(amr)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._it)


class ViewExecutor(concurrent.futures.Executor):
    """submit, map and shutdown on a view: its AsyncResults are the
    futures."""

    def __init__(self, view):
        self.view = view

    def submit(self, fn, /, *args, **kwargs):
        return self.view.apply_async(fn, *args, **kwargs)

    def map(self, fn, *iterables, timeout=None, chunksize=1, **kwargs):
        if self.view.__class__.__name__ == "LoadBalancedView":
            kwargs["chunksize"] = chunksize
        return LazyMapIterator(self.view.map_async(fn, *iterables, **kwargs))

    def shutdown(self, wait=True, *, cancel_futures=False):
        """Waits for what was submitted through the view; the engines go on."""
        if wait:
            self.view.wait()


class IMapIterator:
    """view.imap's iterator: submits calls as results are taken, at most
    `max_outstanding` ahead; cancel() stops submitting."""

    def __init__(self, view, f, sequences, ordered, max_outstanding, return_exceptions):
        self._view = view
        self._f = f
        self._calls = zip(*sequences)
        self._ordered = ordered
        self._max = max(1, int(max_outstanding))
        self._return_exceptions = return_exceptions
        self._pending = collections.deque()
        self._cancelled = False
        self._fill()

    def _fill(self):
        while not self._cancelled and len(self._pending) < self._max:
            call = next(self._calls, None)
            if call is None:
                self._cancelled = True
                return
            self._pending.append(self._view.apply_async(self._f, *call))

    def __iter__(self):
        return self

    def __next__(self):
        if not self._pending:
            self._fill()
            if not self._pending:
                raise StopIteration
        if self._ordered:
            ar = self._pending.popleft()
            ar.wait()
        else:
            done, _ = concurrent.futures.wait([c for ar in self._pending for c in ar._children],
                                              return_when=concurrent.futures.FIRST_COMPLETED)
            first = next(iter(done))
            ar = next(a for a in self._pending if a._children[0] is first)
            self._pending.remove(ar)
        self._fill()
        exc = result_error(ar._children[0], "apply", self._view.client)
        if exc is not None:
            if self._return_exceptions:
                return exc
            raise exc
        return ar.get()

    def cancel(self):
        """Submits no more calls (those submitted go on)."""
        self._cancelled = True


