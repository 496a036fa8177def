"""IPython Parallel's dependencies: Dependency (a set of task ids, checked
by the scheduler), require and depend (checked on the engine)."""

import types

import ztask
from ztask import dependencies as _deps


class Dependency(set):
    """A set of task ids (strings, AsyncResults) with its settings: all of
    them (or any one, all=False) must end in success and/or failure.
    check() and unreachable() answer for given sets of ids."""

    def __init__(self, dependencies=(), all=True, success=True, failure=False):
        if isinstance(dependencies, Dependency):
            all, success, failure = dependencies.all, dependencies.success, dependencies.failure
        super().__init__(_msg_ids(dependencies))
        self.all = all
        self.success = success
        self.failure = failure

    def check(self, completed, failed=None):
        """True when met, given the ids that succeeded and failed."""
        if not self:
            return True
        against = self._accepted(set(completed), set(failed or ()))
        return self.issubset(against) if self.all else not self.isdisjoint(against)

    def unreachable(self, completed, failed=None):
        """True when it can never be met, given those ids."""
        completed, failed = set(completed), set(failed or ())
        rejected = (failed if not self.failure else set()) | (completed if not self.success else set())
        if not self:
            return False
        return not self.isdisjoint(rejected) if self.all else self.issubset(rejected)

    def _accepted(self, completed, failed):
        return (completed if self.success else set()) | (failed if self.failure else set())

    def as_dict(self):
        return {"dependencies": list(self), "all": self.all, "success": self.success, "failure": self.failure}

    def __repr__(self):
        return "Dependency(%s, all=%s, success=%s, failure=%s)" % (sorted(self), self.all, self.success,
                                                                    self.failure)


def _msg_ids(value):
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or hasattr(value, "msg_ids") or hasattr(value, "_task_id"):
        value = [value]
    out = []
    for v in value:
        if hasattr(v, "msg_ids"):
            out.extend(v.msg_ids)
        elif hasattr(v, "_task_id"):
            out.append(v.id)
        elif isinstance(v, Dependency):
            out.extend(v)
        else:
            out.append(v.hex() if isinstance(v, bytes) else str(v))
    return out


def _task_id(msg_id):
    """A task id for a msg_id; one that is not a ztask id becomes an id the
    scheduler never saw, so the task fails with InvalidDependency, as
    IPython Parallel's does, instead of at submission."""
    try:
        return bytes.fromhex(msg_id) if len(msg_id) == 32 else None
    except ValueError:
        return None


def to_ztask(value):
    """A ztask.Dependency (or None) for a flag's value: a Dependency, an
    AsyncResult, ids, or a list of them."""
    if value is None or (isinstance(value, (list, tuple, set)) and not value):
        return None
    if isinstance(value, ztask.Dependency):
        return value
    dep = value if isinstance(value, Dependency) else Dependency(value)
    ids = []
    import hashlib

    for msg_id in dep:
        known = _task_id(msg_id)
        ids.append(known if known is not None else hashlib.sha256(b"ztask.compat unknown " + msg_id.encode())
                   .digest()[:16])
    return ztask.Dependency(ids, all=dep.all, success=dep.success, failure=dep.failure)


def require(*objects, **mapping):
    """Decorates a function that needs these on its engine: modules (names
    or module objects) that must import there, and are imported into its
    namespace; functions and other objects (positional, by their __name__,
    or as name=object) that are put into its namespace before it runs."""
    names, pushed = [], dict(mapping)
    for obj in objects:
        if isinstance(obj, str):
            names.append(obj)
        elif isinstance(obj, types.ModuleType):
            names.append(obj.__name__)
        elif callable(obj) and hasattr(obj, "__name__"):
            pushed[obj.__name__] = obj
        else:
            raise TypeError("require() takes module names, modules and named objects, not %r" % (obj,))

    def decorate(fn):
        fn = _deps.require(*names)(fn)
        if pushed:
            fn.__ztask_push__ = {**getattr(fn, "__ztask_push__", {}), **pushed}
        return fn

    return decorate


depend = ztask.depend
