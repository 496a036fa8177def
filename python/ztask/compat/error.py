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
    """A task raised on its engine: ename, evalue, traceback, engine_info."""

    def __init__(self, ename, evalue, traceback, engine_info=None):
        super().__init__(ename, evalue)
        self.ename = ename
        self.evalue = evalue
        self.traceback = traceback
        self.engine_info = engine_info or {}

    def __str__(self):
        engine = self.engine_info.get("engine_id")
        where = "[Engine Exception]" if engine is None else "[%s:apply]" % engine
        return "%s %s: %s" % (where, self.ename, self.evalue)

    def render_traceback(self):
        return self.traceback.splitlines()


class CompositeError(RemoteError):
    """Errors of several tasks: `elist`; raise_exception() raises one."""

    def __init__(self, message, elist):
        super().__init__("CompositeError", message, "", {})
        self.elist = list(elist)
        self.message = message

    def __str__(self):
        lines = ["%s" % self.message]
        lines.extend("  %s" % e for e in self.elist)
        return "\n".join(lines)

    def raise_exception(self, excid=0):
        raise self.elist[excid]
