"""The ways a task can fail, as exceptions raised by Future.result().

Every one is a TaskError; each error type of docs/protocol.md has its class,
named after it. A Python function that raised on its engine is a
RemoteError, which keeps the remote exception's name, value and traceback.
"""


class TaskError(Exception):
    """A task ended in an error. `task_id` (hex), `error_type` (the
    protocol's name), `message`, and `engine_id` (None when the scheduler
    failed it without an engine)."""

    error_type = "TaskError"

    def __init__(self, message, task_id=None, engine_id=None):
        super().__init__(message)
        self.message = message
        self.task_id = task_id
        self.engine_id = engine_id


class TaskFailed(TaskError):
    """It ran and failed. A command's outcome is in `.result`, a
    CommandResult (exit code, stdout, stderr)."""

    error_type = "TaskFailed"
    result = None


class RemoteError(TaskFailed):
    """A Python function raised: `.ename` (its class's name), `.evalue` (its
    text), `.traceback` (the remote traceback, as text)."""

    def __init__(self, ename, evalue, traceback, task_id=None, engine_id=None):
        super().__init__("%s: %s" % (ename, evalue), task_id, engine_id)
        self.ename = ename
        self.evalue = evalue
        self.traceback = traceback

    def __str__(self):
        return "%s: %s" % (self.ename, self.evalue)

    def render_traceback(self):
        """The remote traceback, as lines (what IPython shows)."""
        return self.traceback.splitlines()


class ImpossibleDependency(TaskError):
    error_type = "ImpossibleDependency"


class InvalidDependency(TaskError):
    error_type = "InvalidDependency"


class TaskTimeout(TaskError):
    error_type = "TaskTimeout"


class TimeLimitExceeded(TaskError):
    error_type = "TimeLimitExceeded"


class EngineError(TaskError):
    error_type = "EngineError"


class TaskAborted(TaskError):
    error_type = "TaskAborted"


class TaskRejected(TaskError):
    error_type = "TaskRejected"


class BadTask(TaskError):
    error_type = "BadTask"


class Unsatisfiable(TaskError):
    """No engine it may use has as many slots or resources as it asks."""

    error_type = "Unsatisfiable"


BY_NAME = {
    cls.error_type: cls
    for cls in (
        TaskFailed,
        ImpossibleDependency,
        InvalidDependency,
        TaskTimeout,
        TimeLimitExceeded,
        EngineError,
        TaskAborted,
        TaskRejected,
        BadTask,
        Unsatisfiable,
    )
}


class ClusterError(Exception):
    """The cluster cannot be used: no connection file, not started, not
    answering. The message says what to do."""


class UnmetDependency(Exception):
    """Raised by a Python task to say it cannot run on this engine: the
    scheduler tries it on another engine, without using a retry."""
