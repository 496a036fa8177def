"""The Python worker a taskengine runs Python function tasks in.

The engine starts it (`python3 -c "from ztask_worker import main; main()"
IN OUT`) on its first Python task and keeps it for the next ones. It reads
tasks from file descriptor IN and writes outcomes to OUT, each a msgpack map
after its length (4 bytes, little-endian). A task carries its function and
arguments cloudpickled; the outcome carries the result cloudpickled, or the
exception's name, text and traceback, and what the task printed.

A module of its own, outside the package, so that an engine's Python
needs only cloudpickle and msgpack (not pyzmq) and starts quickly.

Only the engine talks to it; its own stdin is /dev/null, and what is
written to its stdout or stderr outside a task goes to the engine's log.
"""

import importlib
import io
import os
import struct
import sys
import traceback


def _write(fd, msgpack, message):
    data = msgpack.packb(message, use_bin_type=True)
    data = struct.pack("<I", len(data)) + data
    while data:
        n = os.write(fd, data)
        data = data[n:]


class _Unmet(Exception):
    pass


def _check_requirements(fn):
    """Raises _Unmet when a `require`d module cannot be imported here or a
    `depend` check is false; imports required modules into the function's
    namespace."""
    for name in getattr(fn, "__ztask_require__", ()):
        try:
            module = importlib.import_module(name)
        except ImportError as e:
            raise _Unmet("module %s cannot be imported on this engine (%s)" % (name, e)) from None
        top = name.split(".")[0]
        globs = getattr(fn, "__globals__", None)
        if isinstance(globs, dict):
            globs.setdefault(top, sys.modules.get(top, module))
    for check, args, kwargs in getattr(fn, "__ztask_depend__", ()):
        if not check(*args, **kwargs):
            raise _Unmet("%s(...) is false on this engine" % getattr(check, "__name__", "a check"))


# Functions unpickled, by the bytes they came as (the latest 64): a map's
# tasks all carry the same function. As with any long-lived worker, state a
# function keeps in itself (a mutable default, say) lives on between its
# tasks here.
_functions = {}
_MAX_FUNCTIONS = 64


def _function(cloudpickle, pickled):
    if not isinstance(pickled, bytes):
        return pickled  # sent inside the job by an older client
    fn = _functions.get(pickled)
    if fn is None:
        fn = cloudpickle.loads(pickled)
        if len(_functions) >= _MAX_FUNCTIONS:
            _functions.pop(next(iter(_functions)))
        _functions[pickled] = fn
    return fn


def _run(cloudpickle, task):
    job = cloudpickle.loads(task["payload"])
    fn = _function(cloudpickle, job["fn"])
    _check_requirements(fn)
    if "chunk" in job:
        return [fn(*args) for args in job["chunk"]]
    return fn(*job.get("args", ()), **job.get("kwargs", {}))


def _is_unmet(exc):
    return type(exc).__name__ == "UnmetDependency"


def _serve(fd_in, fd_out, cloudpickle, msgpack):
    real_stdout, real_stderr = sys.stdout, sys.stderr
    tasks = os.fdopen(fd_in, "rb", buffering=1 << 16)  # one read a task, most often
    given = {}  # the environment the latest task was given (its slots, its GPUs)
    while True:
        size = tasks.read(4)
        if len(size) < 4:
            return
        n = struct.unpack("<I", size)[0]
        body = tasks.read(n)
        if len(body) < n:
            return
        task = msgpack.unpackb(body, raw=False)
        os.environ["ZTASK_TASK_ID"] = task.get("task_id", "")
        os.environ["ZTASK_ENGINE_ID"] = str(task.get("engine_id", ""))
        os.environ["ZTASK_ATTEMPT"] = str(task.get("attempt", ""))
        for name in given:
            os.environ.pop(name, None)
        given = task.get("env") or {}
        os.environ.update(given)
        out, err = io.StringIO(), io.StringIO()
        sys.stdout, sys.stderr = out, err
        try:
            value = _run(cloudpickle, task)
            outcome = {"status": "ok"}
            try:
                outcome["result"] = cloudpickle.dumps(value)
            except Exception as e:
                outcome = {"status": "error", "ename": type(e).__name__,
                           "evalue": "the result cannot be pickled: %s" % e,
                           "traceback": traceback.format_exc()}
        except _Unmet as e:
            outcome = {"status": "unmet", "evalue": str(e)}
        except BaseException as e:  # the task's own SystemExit or KeyboardInterrupt included
            if _is_unmet(e):
                outcome = {"status": "unmet", "evalue": str(e) or "UnmetDependency"}
            else:
                outcome = {"status": "error", "ename": type(e).__name__, "evalue": str(e),
                           "traceback": traceback.format_exc()}
        finally:
            sys.stdout, sys.stderr = real_stdout, real_stderr
        outcome["stdout"] = out.getvalue()
        outcome["stderr"] = err.getvalue()
        _write(fd_out, msgpack, outcome)


def main():
    fd_in, fd_out = int(sys.argv[1]), int(sys.argv[2])
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    try:
        import cloudpickle
        import msgpack
    except ImportError as e:
        # The engine reads this one line before any task.
        message = ("the Python worker (%s) cannot import %s: install python3-cloudpickle "
                   "and python3-msgpack, or give taskengine --python" % (sys.executable, e.name))
        data = message.encode()
        data = b"\xdb" + struct.pack(">I", len(data)) + data  # a msgpack str, packed by hand
        os.write(fd_out, struct.pack("<I", len(data)) + data)
        sys.exit(3)
    _write(fd_out, msgpack, {"status": "hello", "python": sys.version.split()[0]})
    _serve(fd_in, fd_out, cloudpickle, msgpack)
