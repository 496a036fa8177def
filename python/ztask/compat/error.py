"""IPython Parallel's errors, in its hierarchy, for programs that catch them
(`ipp.error.RemoteError`, `ipp.error.ImpossibleDependency`...)."""

import builtins


class IPythonError(Exception):
    """The base of every error of this module."""


class KernelError(IPythonError):
    pass


class EngineError(KernelError):
    pass


class TaskAborted(KernelError):
    pass


class TaskTimeout(KernelError):
    pass


class TimeoutError(KernelError, builtins.TimeoutError):
    """get() ran out of time before the results were ready."""


class UnmetDependency(KernelError):
    """Raised by a task that cannot run on this engine (also
    ztask.UnmetDependency, which is what the engines look for)."""


class ImpossibleDependency(UnmetDependency):
    pass


class DependencyTimeout(ImpossibleDependency):
    pass


class InvalidDependency(ImpossibleDependency):
    pass


class TaskRejected(KernelError):
    pass


class RemoteError(KernelError):
    """A task raised on its engine: ename, evalue, traceback, engine_info
    ({"engine_id", "engine_uuid", "method"})."""

    engine_info = None

    def __init__(self, ename, evalue, traceback="", engine_info=None):
        super().__init__(ename, evalue)
        self.ename = ename
        self.evalue = evalue
        self.traceback = traceback or ""
        self.engine_info = engine_info or {}

    def __repr__(self):
        engine = self.engine_info.get("engine_id", " ")
        return "<%s[%s]:%s(%s)>" % (type(self).__name__, engine, self.ename, self.evalue)

    def __str__(self):
        engine = self.engine_info.get("engine_id")
        method = self.engine_info.get("method", "apply")
        where = "[Engine Exception]" if engine is None else "[%s:%s]" % (engine, method)
        return "%s %s: %s" % (where, self.ename, self.evalue)

    def render_traceback(self):
        """The remote traceback as lines (what IPython shows)."""
        text = self.traceback or "%s: %s" % (self.ename, self.evalue)
        return text.splitlines()

    def print_traceback(self, excid=None):
        print("\n".join(self.render_traceback()))

    def _render_traceback_(self):
        return self.render_traceback()


_remote_kinds = {}


def remote(cls, message, engine_info=None):
    """An error of `cls` (TaskAborted, ImpossibleDependency...) that is also
    a RemoteError whose ename is its class's name: IPython Parallel's
    scheduler reports its errors as remote ones, and programs catch either."""
    kind = _remote_kinds.get(cls)
    if kind is None:
        kind = type(cls.__name__, (cls, RemoteError), {"__module__": __name__})
        _remote_kinds[cls] = kind
    return kind(cls.__name__, message, "", engine_info)


class CompositeError(RemoteError):
    """Errors of several tasks: `elist`, a list of (ename, evalue,
    traceback, engine_info); raise_exception(i) raises one as a RemoteError."""

    tb_limit = 4

    def __init__(self, message, elist):
        super().__init__("CompositeError", message, "", {})
        self.elist = [self._entry(e) for e in elist]
        self.message = message

    @staticmethod
    def _entry(e):
        if isinstance(e, tuple):
            return e
        if isinstance(e, RemoteError):
            return (e.ename, e.evalue, e.traceback, e.engine_info)
        return (type(e).__name__, str(e), "", {})

    def __str__(self):
        lines = ["%s" % self.message]
        for ename, evalue, _, info in self.elist:
            engine = info.get("engine_id")
            where = "[Engine Exception]" if engine is None else "[%s:%s]" % (engine, info.get("method", "apply"))
            lines.append("%s %s: %s" % (where, ename, evalue))
        return "\n".join(lines)

    def render_traceback(self, excid=None):
        """Each error's traceback (at most tb_limit of them), or one's."""
        lines = []
        if excid is None:
            for ename, evalue, tb, info in self.elist[:self.tb_limit]:
                engine = info.get("engine_id")
                lines.append("[%s:%s] %s: %s" % (engine, info.get("method", "apply"), ename, evalue))
                lines.extend((tb or "").splitlines())
                lines.append("")
            if len(self.elist) > self.tb_limit:
                lines.append("... %d more exceptions ..." % (len(self.elist) - self.tb_limit))
        else:
            ename, evalue, tb, info = self.elist[excid]
            lines = (tb or "%s: %s" % (ename, evalue)).splitlines()
        return lines

    def print_traceback(self, excid=None):
        print("\n".join(self.render_traceback(excid)))

    def raise_exception(self, excid=0):
        ename, evalue, tb, info = self.elist[excid]
        raise RemoteError(ename, evalue, tb, info)


class AlreadyDisplayedError(RemoteError):
    """An error whose outputs were shown already (by %px): its
    original_error is the error itself."""

    def __init__(self, original_error):
        super().__init__(original_error.ename, original_error.evalue, original_error.traceback,
                         original_error.engine_info)
        self.original_error = original_error


class NoEnginesRegistered(Exception):
    """No engine is running."""


def collect_exceptions(rdict_or_list, method="unspecified"):
    """Raises a CompositeError of the errors in a list of results (returns
    the list when there are none)."""
    values = list(rdict_or_list.values()) if isinstance(rdict_or_list, dict) else list(rdict_or_list)
    elist = [v for v in values if isinstance(v, RemoteError)]
    if not elist:
        return rdict_or_list
    raise CompositeError("one or more exceptions from call to method: %s" % method, elist)
