"""A task's future and how a reply or a record becomes its value or its
error. Shared by the client and its I/O thread.

Thread safety: futures may be waited on from any thread; they are settled
by the client's I/O thread.
"""

import collections
import concurrent.futures
import time

import cloudpickle

from . import errors

# Results and arguments of Python function tasks travel as {"pickle": bytes}.
PICKLE_KEY = "pickle"


class CommandResult(collections.namedtuple("CommandResult", "exit_code stdout stderr")):
    """What a command task printed and how it exited."""


class Future(concurrent.futures.Future):
    """A task's future: `.result()` returns its value or raises its
    TaskError. Adds `.id` (hex), `.engine_id` and `.record` (the hub's
    record, as a dict)."""

    def __init__(self, client, task_id, kind):
        super().__init__()
        self._client = client
        self._task_id = task_id
        self._kind = kind
        self._cancelling = False
        self.engine_id = None
        self._outputs = None  # (started, completed, stdout, stderr) once settled

    @property
    def id(self):
        return self._task_id.hex()

    def result(self, timeout=None):
        return super().result(self._lead(timeout))

    def exception(self, timeout=None):
        return super().exception(self._lead(timeout))

    def _lead(self, timeout):
        """Drives the client's loop on this thread while waiting, when no
        other thread does (see _io.py); returns the time left to wait."""
        if self.done():
            return timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        self._client._io.lead_until(self, timeout)
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    @property
    def record(self):
        """The hub's record; once the future is done, its final one (the
        hub may record an outcome a moment after the reply came)."""
        return self._client._record(self._task_id, final=self.done())

    def cancel(self):
        """Aborts the task if it has not started; True when it was."""
        if self.done():
            return super().cancel()
        self._cancelling = True
        outcome = self._client.abort([self])
        if self.id in outcome["aborted"]:
            # Its TaskAborted reply may have come first: it cancelled then.
            return super().cancel() or self.cancelled()
        self._cancelling = False
        return False

    def __repr__(self):
        return "<ztask.Future %s %s>" % (self.id[:12], self._state.lower())


def _settle(future, value=None, exception=None):
    try:
        if isinstance(exception, errors.TaskAborted) and getattr(future, "_cancelling", False):
            concurrent.futures.Future.cancel(future)  # aborted by its own cancel()
        elif exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(value)
    except concurrent.futures.InvalidStateError:
        pass  # cancelled meanwhile


def outcome_of(kind, ok, error_type, body, task_id, engine_id):
    """(value, exception) from a reply's or a record's body (`result`,
    `error_message`, `exit_code`, `stdout`, `stderr`)."""
    result = body.get("result")
    hex_id = task_id.hex()
    if kind is None:  # a task this client did not submit: guessed from its body
        if isinstance(result, dict) and (PICKLE_KEY in result or "ename" in result):
            kind = "python"
        elif body.get("exit_code") is not None:
            kind = "command"
    if ok:
        if kind == "python":
            pickled = result.get(PICKLE_KEY) if isinstance(result, dict) else None
            if not isinstance(pickled, bytes):
                return None, errors.BadTask("task %s: its result is not a pickled value" % hex_id, hex_id, engine_id)
            try:
                return cloudpickle.loads(pickled), None
            except Exception as e:
                return None, errors.TaskError(
                    "task %s: its result cannot be unpickled here: %s: %s" % (hex_id, type(e).__name__, e),
                    hex_id,
                    engine_id,
                )
        if kind == "command":
            return CommandResult(body.get("exit_code"), body.get("stdout", ""), body.get("stderr", "")), None
        return result, None
    message = body.get("error_message") or error_type or "failed"
    if error_type == "TaskFailed" and isinstance(result, dict) and "ename" in result:
        exc = errors.RemoteError(
            str(result.get("ename")), str(result.get("evalue", "")), str(result.get("traceback", "")), hex_id, engine_id
        )
    else:
        cls = errors.BY_NAME.get(error_type, errors.TaskError)
        exc = cls("task %s: %s" % (hex_id, message) if hex_id not in message else message, hex_id, engine_id)
    if kind == "command" and isinstance(exc, errors.TaskFailed):
        exc.result = CommandResult(body.get("exit_code"), body.get("stdout", ""), body.get("stderr", ""))
    return None, exc


def _spread(parts):
    def done(whole):
        if whole.cancelled():
            for p in parts:
                p.cancel()
            return
        exc = whole.exception()
        values = None if exc is not None else whole.result()
        for i, p in enumerate(parts):
            p.engine_id = getattr(whole, "engine_id", None)
            p._outputs = whole._outputs
            _settle(p, None if values is None else values[i], exc)

    return done
