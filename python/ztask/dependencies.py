"""Dependencies between tasks (after: when; follow: where), and functional
dependencies: what a Python function needs of the engine it runs on."""


def ids_of(items):
    """Task ids (16 bytes each) from Futures, hex ids, bytes, or a list of them."""
    from . import protocol

    if items is None:
        return []
    if isinstance(items, (str, bytes, bytearray)) or hasattr(items, "_task_id"):
        items = [items]
    out = []
    for item in items:
        if hasattr(item, "_task_id"):
            out.append(item._task_id)
        elif hasattr(item, "msg_ids"):  # an AsyncResult of ztask.compat
            out.extend(protocol.id_from(i) for i in item.msg_ids)
        else:
            out.append(protocol.id_from(item))
    return out


class Dependency:
    """A set of tasks with its settings: all of them (or any one) must end
    in success (and/or failure) for the dependency to be met."""

    def __init__(self, ids=(), all=True, success=True, failure=False):
        if not success and not failure:
            raise ValueError("a Dependency must accept success, failure, or both")
        self.ids = ids_of(ids)
        self.all = bool(all)
        self.success = bool(success)
        self.failure = bool(failure)

    def wire(self):
        outcome = "either" if self.success and self.failure else ("success" if self.success else "failure")
        from . import protocol

        return protocol.lean({"ids": self.ids, "mode": "all" if self.all else "any", "outcome": outcome},
                             protocol.DEPENDENCY_DEFAULTS)

    def __len__(self):
        return len(self.ids)

    def __repr__(self):
        return "Dependency(%d ids, all=%s, success=%s, failure=%s)" % (
            len(self.ids), self.all, self.success, self.failure)


def dependency_of(value):
    """A Dependency from None, a Dependency, a Future, an id, or a list."""
    if isinstance(value, Dependency):
        return value
    return Dependency(value)


def require(*modules):
    """Decorates a function that runs only where these modules import; on
    an engine where one does not, the task is tried on another engine, and
    fails with ImpossibleDependency when none can run it. Each module is
    imported into the function's namespace before it runs."""
    names = []
    for m in modules:
        names.append(m if isinstance(m, str) else m.__name__)

    def decorate(fn):
        fn.__ztask_require__ = tuple(getattr(fn, "__ztask_require__", ())) + tuple(names)
        return fn

    return decorate


def depend(check, *args, **kwargs):
    """Decorates a function that runs only on an engine where
    check(*args, **kwargs) is true (checked there, before it runs)."""

    def decorate(fn):
        fn.__ztask_depend__ = tuple(getattr(fn, "__ztask_depend__", ())) + ((check, args, kwargs),)
        return fn

    return decorate
