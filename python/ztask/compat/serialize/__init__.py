"""What programs import of ipyparallel.serialize: Reference, and can/uncan,
which here prepare a function for a namespace (ztask sends everything with
cloudpickle; there is no canning step of its own)."""

import types

from ztask_worker import Reference

__all__ = ["Reference", "can", "uncan"]


def can(obj):
    """Returns obj: ztask pickles objects as they are."""
    return obj


def uncan(obj, g=None):
    """obj for the namespace `g`: an interactively defined function (its
    module is __main__) gets `g` as its globals, and what it `require`s is
    imported into `g`, as it would be on an engine."""
    if g is None or not isinstance(obj, types.FunctionType) or obj.__module__ != "__main__":
        return obj
    f = types.FunctionType(obj.__code__, g, obj.__name__, obj.__defaults__, obj.__closure__)
    f.__kwdefaults__ = obj.__kwdefaults__
    f.__dict__.update(obj.__dict__)
    import importlib

    for name in getattr(obj, "__ztask_require__", ()):
        importlib.import_module(name)
        top = name.split(".")[0]
        g.setdefault(top, importlib.import_module(top))
    for name, value in getattr(obj, "__ztask_push__", {}).items():
        g[name] = uncan(value, g)
    return f
