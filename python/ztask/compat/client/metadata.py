"""A task's metadata and its error, in IPython Parallel's shapes, from a
ztask future (its reply's times and outputs, kept on it)."""

import time

import ztask_worker
from ztask import errors as _errors

from .. import error
from ..util import _datetime


class Metadata(dict):
    """A task's metadata: a dict whose keys are attributes too
    (`md.engine_id`)."""

    KEYS = ("msg_id", "submitted", "started", "completed", "received", "engine_uuid", "engine_id", "follow",
            "after", "status", "execute_input", "execute_result", "error", "stdout", "stderr", "outputs", "data",
            "is_broadcast", "is_coalescing")

    def __init__(self, *args, **kwargs):
        super().__init__({key: None for key in self.KEYS})
        self.update({"stdout": "", "stderr": "", "outputs": [], "data": {}, "follow": [], "after": [],
                     "is_broadcast": False, "is_coalescing": False})
        self.update(*args, **kwargs)

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key, value):
        self[key] = value


def stamp(future, submitted_at=None, **compat):
    """Notes on a future what its metadata needs that its reply does not
    carry: when it was submitted (taken before it was sent, so that no engine
    can start it earlier), how (method), its code."""
    future._submitted_at = time.time() if submitted_at is None else submitted_at
    future._compat = compat
    return future


def metadata_of(future, client=None):
    md = Metadata(msg_id=future.id)
    submitted = getattr(future, "_submitted_at", None)
    compat = getattr(future, "_compat", None) or {}
    md["execute_input"] = compat.get("code")
    outputs = getattr(future, "_outputs", None)
    if outputs is None and future.done() and getattr(future, "_kind", "python") is None:
        outputs = None
    if submitted is not None:
        md["submitted"] = _datetime(submitted * 1e6)
    if future.done():
        md["engine_id"] = future.engine_id
        if client is not None and future.engine_id is not None:
            md["engine_uuid"] = client._engine_uuid(future.engine_id)
        if outputs is not None:
            started, completed, stdout, stderr = outputs
            md["started"], md["completed"] = _datetime(started), _datetime(completed)
            md["stdout"], md["stderr"] = stdout, stderr
        md["received"] = md["completed"]
        if future.cancelled():
            md["status"] = "aborted"
        else:
            exc = future.exception()
            md["status"] = "ok" if exc is None else "error"
            if exc is None:
                reply = future.result()
                if isinstance(reply, ztask_worker.Displayed):
                    md["outputs"] = reply.outputs
                elif isinstance(reply, ztask_worker.ExecuteOutcome):
                    md["execute_result"] = reply.get("execute_result")
                    md["outputs"] = reply.get("outputs") or []
                    md["data"] = reply.get("data") or {}
            elif exc is not None:
                md["error"] = result_error(future, compat.get("method", "apply"), client)
        if md["submitted"] is None:
            md["submitted"] = md["started"]
    return md


_BY_TYPE = {
    "ImpossibleDependency": error.ImpossibleDependency,
    "InvalidDependency": error.InvalidDependency,
    "TaskTimeout": error.TaskTimeout,
    "TimeLimitExceeded": error.TaskTimeout,
    "EngineError": error.EngineError,
    "TaskAborted": error.TaskAborted,
    "TaskRejected": error.TaskRejected,
    "Unsatisfiable": error.ImpossibleDependency,
}


def result_error(future, method="apply", client=None):
    """The IPython Parallel error of a finished future (None when it
    succeeded); the same object each time it is asked."""
    cached = getattr(future, "_ipp_error", None)
    if cached is not None:
        return cached
    method = (getattr(future, "_compat", None) or {}).get("method", method)
    if future.cancelled():
        exc = error.remote(error.TaskAborted, "task %s was aborted" % future.id)
    else:
        raw = future.exception()
        if raw is None:
            return None
        engine = getattr(raw, "engine_id", None)
        if engine is None:
            engine = future.engine_id
        info = {"engine_id": engine,
                "engine_uuid": client._engine_uuid(engine) if client is not None and engine is not None else None,
                "method": method}
        if isinstance(raw, _errors.RemoteError):
            exc = error.RemoteError(raw.ename, raw.evalue, raw.traceback, info)
        elif isinstance(raw, _errors.TaskError):
            if raw.error_type in ("EngineError", "TimeLimitExceeded") and client is not None and engine is not None:
                client._lost_namespaces.add(engine)  # its Python worker died or was killed
            cls = _BY_TYPE.get(raw.error_type)
            if cls is error.ImpossibleDependency and method == "execute":
                cls = error.TaskAborted  # queued behind an execute that failed (view.execute)
            if cls is None:
                exc = error.RemoteError(type(raw).__name__, str(raw), "", info)
            else:
                exc = error.remote(cls, str(raw), info)
        elif isinstance(raw, error.RemoteError):
            exc = raw
        else:
            exc = error.RemoteError(type(raw).__name__, str(raw), "", info)
    future._ipp_error = exc
    return exc
