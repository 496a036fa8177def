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

import ast
import importlib
import io
import itertools
import os
import signal
import struct
import sys
import traceback
import types


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
    pushed = getattr(fn, "__ztask_push__", None)
    if pushed:
        globs = getattr(fn, "__globals__", None)
        if isinstance(globs, dict):
            for name, value in pushed.items():
                globs[name] = _bound(value, "pickle") if globs is namespace else value
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


# ---- The engine's namespace -------------------------------------------------
#
# IPython Parallel's API (ztask.compat) gives each engine a namespace that
# lives as long as its worker: push, pull, execute, scatter and gather work
# on it, and a function defined interactively (its module is __main__) runs
# with it as its globals. It is this process's __main__, so that what
# `execute` defines pickles as it would in a script. The functions below are
# what ztask.compat sends as tasks (by reference); ztask's own API never uses
# them. A worker that dies loses its namespace (ztask.compat warns when it
# next uses that engine).

namespace = sys.modules["__main__"].__dict__
_BUILTIN_NAMES = frozenset(namespace) | {"__builtins__", "__name__", "__doc__"}
_execution_count = itertools.count(1)


class Reference:
    """A name (or expression) to look up in the engine's namespace when a
    task that carries it as an argument, or as its function, runs there."""

    def __init__(self, name):
        if not isinstance(name, str):
            raise TypeError("a Reference takes a name (a string), not %r" % (name,))
        self.name = name

    def resolve(self, ns=None):
        return eval(self.name, namespace if ns is None else ns)

    def __repr__(self):
        return "<Reference: %r>" % self.name


def _bound(value, mode):
    """`value` as it lives in the namespace: an interactively defined
    function gets the namespace as its globals (unless the client asked for
    cloudpickle's semantics, where it keeps the globals it came with)."""
    if (mode == "cloudpickle" or not isinstance(value, types.FunctionType)
            or value.__module__ != "__main__" or value.__globals__ is namespace):
        return value
    for name, captured in value.__globals__.items():
        if isinstance(captured, types.ModuleType):  # its imports come along
            namespace.setdefault(name, captured)
    defaults = value.__defaults__
    if defaults:
        defaults = tuple(_bound(d, mode) for d in defaults)
    f = types.FunctionType(value.__code__, namespace, value.__name__, defaults, value.__closure__)
    f.__kwdefaults__ = value.__kwdefaults__
    f.__qualname__ = value.__qualname__
    f.__doc__ = value.__doc__
    f.__dict__.update(value.__dict__)
    return f


def _resolved(value, mode, depth=0):
    """Arguments with their References looked up (also inside lists, tuples
    and dicts) and interactive functions bound to the namespace."""
    if isinstance(value, Reference):
        return value.resolve()
    if depth < 4:
        if type(value) in (list, tuple):
            return type(value)(_resolved(v, mode, depth + 1) for v in value)
        if type(value) is dict:
            return {k: _resolved(v, mode, depth + 1) for k, v in value.items()}
    return _bound(value, mode)


def _prepared(fn, mode):
    fn = _resolved(fn, mode)
    _check_requirements(fn)
    return fn


class Displayed:
    """A function's value with what it showed with display() (IPython's
    shell, once an execute made it): ns_apply's answer when there is any."""

    def __init__(self, value, outputs):
        self.value = value
        self.outputs = outputs


def ns_apply(mode, fn, args, kwargs):
    """fn(*args, **kwargs) in the namespace."""
    fn = _prepared(fn, mode)
    if not _the_shell:
        return fn(*_resolved(list(args), mode), **_resolved(dict(kwargs), mode))
    current["outputs"] = []
    value = fn(*_resolved(list(args), mode), **_resolved(dict(kwargs), mode))
    return Displayed(value, current["outputs"]) if current["outputs"] else value


def ns_map(mode, fn, sequences):
    """[fn(*call) for each call of the sequences], in the namespace."""
    fn = _prepared(fn, mode)
    return [fn(*call) for call in zip(*_resolved(list(sequences), mode))]


def _set(name, value):
    if "." in name:  # view["a.b"] = value: an attribute of an object there
        owner, attribute = name.rsplit(".", 1)
        setattr(eval(owner, namespace), attribute, value)
    else:
        namespace[name] = value


def ns_push(values, mode="pickle"):
    for name, value in values.items():
        _set(name, _bound(value, mode))


def ns_pull(names):
    """The value of a name (an expression: "a.b", "g[0]"), or a tuple of
    them for a list of names."""
    if isinstance(names, str):
        return eval(names, namespace)
    return [eval(name, namespace) for name in names]


def ns_import(name, fromlist, level):
    """An import statement run on the client (sync_imports), run here too:
    what it binds goes into the namespace."""
    module = __import__(name, namespace, namespace, fromlist or (), level)
    if fromlist:
        for item in fromlist:
            if item != "*":
                namespace[item] = getattr(module, item)
    else:
        namespace[name.split(".")[0]] = module


def ns_scatter(name, part, flatten):
    namespace[name] = part[0] if flatten and len(part) == 1 else part


def ns_clear():
    """Forgets every name the engine's users defined."""
    for name in [n for n in namespace if n not in _BUILTIN_NAMES]:
        del namespace[name]


class ExecuteOutcome(dict):
    """What ns_execute returns (execution_count, execute_result): a dict
    whose type says it is an execute's, wherever its record is read."""


def ns_execute(code, silent=True):
    """Runs code in the namespace, with IPython's shell when this Python
    has IPython (magics, display(), rich results), else as plain Python.
    With silent=False, the value of a last expression is its result, as a
    notebook shows it. Returns the reply's content: execution_count,
    execute_result, outputs (what display() showed), data (publish_data)."""
    current.update(outputs=[], data={}, result=None)
    shell = _shell()
    if shell is not None:
        result = shell.run_cell(code, silent=silent, store_history=not silent)
        if result.error_before_exec is not None:
            raise result.error_before_exec
        if result.error_in_exec is not None:
            error, tb = result.error_in_exec, result.error_in_exec.__traceback__
            while tb is not None and tb.tb_next is not None and "IPython" in tb.tb_frame.f_code.co_filename:
                tb = tb.tb_next  # the shell's own frames: the cell's are what its user wants
            raise error.with_traceback(tb)
        count = shell.execution_count - (0 if silent else 1)
        return ExecuteOutcome(execution_count=count, execute_result=None if silent else current.get("result"),
                              outputs=current["outputs"], data=current["data"])
    count = next(_execution_count)
    tree = ast.parse(code, "<execute-%d>" % count, "exec")
    last = None
    if not silent and tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<execute-%d>" % count, "exec"), namespace)
    result = None
    if last is not None:
        value = eval(compile(last, "<execute-%d>" % count, "eval"), namespace)
        if value is not None:
            namespace["_"] = value
            result = dict(_mime_bundle(value), execution_count=count)
    return ExecuteOutcome(execution_count=count, execute_result=result, outputs=[], data=current["data"])


# What the running execute showed: display() outputs, its result, published
# data (ztask.compat.datapub).
current = {"outputs": [], "data": {}}
_the_shell = None


def _shell():
    """IPython's shell over the namespace, made on the first execute (None
    without IPython): what it displays is kept in `current`."""
    global _the_shell, _BUILTIN_NAMES
    if _the_shell is not None:
        return _the_shell or None
    try:
        from IPython.core.displayhook import DisplayHook
        from IPython.core.displaypub import DisplayPublisher
        from IPython.core.interactiveshell import InteractiveShell
    except ImportError:
        _the_shell = False
        return None

    class Publisher(DisplayPublisher):
        def publish(self, data, metadata=None, source=None, transient=None, update=False, **kwargs):
            current["outputs"].append({"data": data, "metadata": metadata or {}})

    class Hook(DisplayHook):
        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            current["result"] = {"data": format_dict, "metadata": md_dict or {},
                                 "execution_count": self.shell.execution_count}

    shell = InteractiveShell.instance(user_module=sys.modules["__main__"], colors="NoColor")
    shell.display_pub = Publisher(shell=shell)
    shell.displayhook = Hook(shell=shell)
    shell.display_trap.hook = shell.displayhook
    shell._showtraceback = lambda *args, **kwargs: None
    shell.enable_gui = lambda gui=None: None  # no event loop here: %matplotlib inline needs none
    _BUILTIN_NAMES = _BUILTIN_NAMES | frozenset(namespace)
    _the_shell = shell
    return shell


def _mime_bundle(value):
    """{"data": {mime: value}, "metadata": {mime: ...}} of a displayed
    value, from its _repr_*_ methods."""
    data, metadata = {"text/plain": repr(value)}, {}
    for mime, method in (("text/html", "_repr_html_"), ("image/png", "_repr_png_"),
                         ("text/markdown", "_repr_markdown_"), ("text/latex", "_repr_latex_")):
        shown = getattr(value, method, None)
        if callable(shown):
            try:
                out = shown()
            except Exception:
                continue
            if isinstance(out, tuple):
                out, metadata[mime] = out[0], out[1]
            if out is not None:
                data[mime] = out
    return {"data": data, "metadata": metadata}


def ns_run(code, filename):
    """A file's code, read on the client, run in the namespace."""
    exec(compile(code + "\n", filename, "exec"), namespace)


# ---- A dask.distributed worker in this process (Client.become_dask) ---------

_dask = None  # (its event loop, the loop's thread, the Worker or Nanny) while it runs


def ns_dask_worker(address, nanny, kwargs):
    """Starts a dask.distributed Worker (a Nanny with `nanny`) of the
    scheduler at `address` here, its event loop on a thread of its own, and
    names it `distributed_worker` and `dask_worker` in the namespace. One
    runs already: nothing."""
    global _dask
    if _dask is not None:
        return
    import asyncio
    import threading
    from distributed import Nanny, Worker

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="dask-worker", daemon=True)
    thread.start()

    async def start():
        return await (Nanny if nanny else Worker)(address, **kwargs)

    try:
        worker = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=60)
    except BaseException:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        raise
    _dask = (loop, thread, worker)
    namespace["distributed_worker"] = namespace["dask_worker"] = worker


def ns_stop_dask_worker():
    """Stops the worker ns_dask_worker started, and forgets its names."""
    global _dask
    if _dask is None:
        return
    import asyncio

    loop, thread, worker = _dask
    _dask = None
    for name in ("distributed_worker", "dask_worker"):
        if namespace.get(name) is worker:
            del namespace[name]
    try:
        asyncio.run_coroutine_threadsafe(worker.close(), loop).result(timeout=30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def _user_traceback(exc):
    """The traceback from the task's own code on (this module's frames,
    which ran it, left out)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


_running = False


class _KeptText(io.TextIOBase):
    """A task's stdout or stderr as the engine keeps it: the first `limit`
    characters and one more (so that the engine, which keeps `limit` bytes,
    marks it truncated), the rest only counted. Printing 300 MB costs the
    worker no more memory than the limit. No limit: everything."""

    def __init__(self, limit):
        super().__init__()
        self._room = None if limit is None else limit + 1
        self._parts = []

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        if self._room is None:
            self._parts.append(text)
        elif self._room > 0:
            kept = text[:self._room]
            self._parts.append(kept)
            self._room -= len(kept)
        return len(text)

    def getvalue(self):
        return "".join(self._parts)


class _KeptBytes:
    """Where a result is pickled: its bytes while they are within `limit`,
    then only their count. A result over the engine's limit never exists
    twice in the worker (as the value and as its pickle). No limit: all."""

    def __init__(self, limit):
        self._limit = limit
        self._parts = []
        self.size = 0

    def write(self, data):
        # bytes, or for a large buffer (a numpy array's) the buffer itself:
        # a memoryview or a pickle.PickleBuffer, which has no len().
        n = len(data) if isinstance(data, bytes) else memoryview(data).nbytes
        self.size += n
        if self._limit is not None and self.size > self._limit:
            self._parts = None
        elif self._parts is not None:
            self._parts.append(bytes(data))
        return n

    def over(self):
        return self._parts is None

    def getvalue(self):
        return b"".join(self._parts)


def _pickled_result(cloudpickle, value, limit):
    """The outcome of a value that ran to its end: pickled, or too large."""
    kept = _KeptBytes(limit)
    cloudpickle.dump(value, kept)
    if kept.over():
        return {"status": "too_large",
                "evalue": "its result is %d bytes, over the engine's limit of %d bytes "
                          "(taskengine --max-result-bytes)" % (kept.size, limit)}
    return {"status": "ok", "result": kept.getvalue()}


def _interrupt(signum, frame):
    """SIGINT (Client.send_signal, %%px's Ctrl-C) interrupts the running
    task, as KeyboardInterrupt; between tasks the worker ignores it."""
    if _running:
        raise KeyboardInterrupt()


def _serve(fd_in, fd_out, cloudpickle, msgpack):
    global _running
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
        out = _KeptText(task.get("max_output_bytes"))
        err = _KeptText(task.get("max_output_bytes"))
        sys.stdout, sys.stderr = out, err
        try:
            _running = True
            try:
                value = _run(cloudpickle, task)
            finally:
                _running = False
            try:
                outcome = _pickled_result(cloudpickle, value, task.get("max_result_bytes"))
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
                           "traceback": _user_traceback(e)}
        finally:
            sys.stdout, sys.stderr = real_stdout, real_stderr
        outcome["stdout"] = out.getvalue()
        outcome["stderr"] = err.getvalue()
        _write(fd_out, msgpack, outcome)


def main():
    fd_in, fd_out = int(sys.argv[1]), int(sys.argv[2])
    if namespace.get("main") is main:  # the engine's `from ztask_worker import main`: not a user's name
        del namespace["main"]
    signal.signal(signal.SIGINT, _interrupt)
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
