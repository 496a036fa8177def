"""IPython Parallel's API over ztask: `import ztask.compat as ipp`.

An IPython Parallel program that uses the load-balanced view runs by
changing its import: Client (with .ids, client[i] and client[:] as views
pinned to engines), load_balanced_view() with apply/apply_async/apply_sync,
map/map_async/map_sync, block, temp_flags and set_flags (after, follow,
timeout, retries, targets); AsyncResult; Dependency, require, depend; and
ipp.error in IPython Parallel's hierarchy. docs/python.md lists what is not
supported (push/pull/execute and every other namespace operation of the
direct view, the hub's database queries, engine-side `%px`).
"""

import contextlib
import datetime
import os
import time

import ztask
from ztask import errors as _errors

from . import error
from .error import CompositeError, RemoteError, TimeoutError

Dependency = ztask.Dependency
require = ztask.require
depend = ztask.depend

__all__ = ["Client", "LoadBalancedView", "DirectView", "AsyncResult", "AsyncMapResult", "Dependency", "require",
           "depend", "error"]


class Client:
    """Connects to a ztask cluster: `profile_dir`, a connection file
    (`url_file`), or `profile` NAME (~/.ztask/profile_NAME); by default
    ZTASK_PROFILE_DIR or ~/.ztask/profile_default."""

    def __init__(self, url_file=None, profile=None, profile_dir=None, timeout=10, **_ignored):
        where = profile_dir or url_file
        if where is None and profile:
            where = os.path.join(os.path.expanduser("~"), ".ztask", "profile_" + profile)
        self._client = ztask.Client(where)
        if timeout:
            deadline = time.monotonic() + timeout
            while not self.ids and time.monotonic() < deadline:
                time.sleep(0.05)

    @property
    def ids(self):
        """The ids of the running engines, in order."""
        return self._client.ids

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, key):
        """client[i], client[[i, j]], client[:]: a DirectView on those engines."""
        ids = self.ids
        if isinstance(key, slice):
            targets = ids[key]
        elif isinstance(key, int):
            if key not in ids:
                raise IndexError("no engine %d (engines: %s)" % (key, ids))
            targets = key
        else:
            targets = list(key)
        return DirectView(self, targets)

    def load_balanced_view(self, targets=None):
        view = LoadBalancedView(self)
        if targets is not None:
            view.targets = targets
        return view

    def direct_view(self, targets="all"):
        return DirectView(self, self.ids if targets in ("all", None) else targets)

    def wait(self, jobs=None, timeout=-1):
        """Waits for AsyncResults or ids; True when all are done in time."""
        futures = _futures_of(self, jobs or [])
        done, not_done = ztask.wait(futures, timeout=None if timeout is None or timeout < 0 else timeout)
        return not not_done

    def abort(self, jobs=None, targets=None, block=None):
        return self._client.abort(_futures_of(self, jobs or []))

    def get_result(self, indices_or_msg_ids, block=None, owner=False):
        ids = indices_or_msg_ids
        single = isinstance(ids, str)
        futures = [self._client.get(i) for i in ([ids] if single else ids)]
        return AsyncResult(self, futures, single=single)

    def shutdown(self, targets="all", restart=False, hub=False, block=None):
        """With hub=True, stops the whole cluster (its supervisor stops every
        engine). Engines alone are not stopped here: a supervised pool is
        shrunk with `taskcluster scale N`."""
        if hub:
            from ztask import protocol

            self._client._ask_hub(protocol.SHUTDOWN_REQUEST, {})
        else:
            import warnings

            warnings.warn("ztask.compat: shutdown() without hub=True does nothing; the engines are "
                          "supervised (taskcluster scale N, taskcluster stop)", stacklevel=2)

    def close(self, linger=None):
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _futures_of(client, jobs):
    if isinstance(jobs, (AsyncResult, str, ztask.Future)):
        jobs = [jobs]
    out = []
    for job in jobs:
        if isinstance(job, AsyncResult):
            out.extend(job._futures)
        elif isinstance(job, ztask.Future):
            out.append(job)
        else:
            out.append(client._client.get(job))
    return out


def _dependency(value):
    if value is None or isinstance(value, ztask.Dependency):
        return value
    if isinstance(value, AsyncResult):
        return ztask.Dependency(value.msg_ids)
    if isinstance(value, (list, tuple, set)):
        ids = []
        for v in value:
            ids.extend(v.msg_ids if isinstance(v, AsyncResult) else [v])
        return ztask.Dependency(ids)
    return ztask.Dependency(value)


class _View:
    """The flags and calls both kinds of views share."""

    _FLAGS = ("after", "follow", "timeout", "retries", "targets")

    def __init__(self, client):
        self.client = client
        self.block = False
        self.after = None
        self.follow = None
        self.timeout = None
        self.retries = 0
        self.targets = None

    def set_flags(self, **kwargs):
        for name, value in kwargs.items():
            if name not in self._FLAGS + ("block",):
                raise KeyError("Invalid name: %r (flags: %s)" % (name, ", ".join(self._FLAGS + ("block",))))
            setattr(self, name, value)

    @contextlib.contextmanager
    def temp_flags(self, **kwargs):
        saved = {name: getattr(self, name) for name in kwargs}
        self.set_flags(**kwargs)
        try:
            yield
        finally:
            for name, value in saved.items():
                setattr(self, name, value)

    def _options(self, targets):
        return {
            "after": _dependency(self.after),
            "follow": _dependency(self.follow),
            "timeout": self.timeout or None,
            "retries": self.retries or 0,
            "targets": targets,
        }

    def apply(self, f, *args, **kwargs):
        """f(*args, **kwargs): its result when the view blocks, else an
        AsyncResult."""
        return self._maybe_block(self.apply_async(f, *args, **kwargs), self.block)

    def apply_sync(self, f, *args, **kwargs):
        return self.apply_async(f, *args, **kwargs).get()

    def map(self, f, *sequences, block=None, chunksize=1, ordered=True, **_ignored):
        block = self.block if block is None else block
        return self._maybe_block(self.map_async(f, *sequences, chunksize=chunksize), block)

    def map_sync(self, f, *sequences, chunksize=1, **_ignored):
        return self.map_async(f, *sequences, chunksize=chunksize).get()

    @staticmethod
    def _maybe_block(result, block):
        return result.get() if block else result

    def remote(self, block=None):
        """Decorates a function so that calling it runs it on the view."""
        def decorate(f):
            def call(*args, **kwargs):
                use = self.block if block is None else block
                return self._maybe_block(self.apply_async(f, *args, **kwargs), use)

            call.__name__ = getattr(f, "__name__", "remote")
            call.__doc__ = getattr(f, "__doc__", None)
            return call

        return decorate

    def parallel(self, block=None, chunksize=1, **_ignored):
        """Decorates a function so that calling it (or its .map) maps it over
        sequences on the view."""
        view = self

        class Parallel:
            def __init__(self, f):
                self.func = f
                self.__name__ = getattr(f, "__name__", "parallel")

            def map(self, *sequences):
                use = view.block if block is None else block
                return view._maybe_block(view.map_async(self.func, *sequences, chunksize=chunksize), use)

            __call__ = map

        return Parallel

    def _no_namespace(self, *args, **kwargs):
        raise NotImplementedError(
            "ztask engines keep no state between tasks: push, pull, execute, run, scatter, gather and "
            "view[name] are not supported; pass values as arguments and return results instead")

    push = pull = execute = run = scatter = gather = __setitem__ = __getitem__ = _no_namespace


class LoadBalancedView(_View):
    """Tasks go to whichever engine the scheduler picks."""

    def apply_async(self, f, *args, **kwargs):
        future = self.client._client.submit(f, *args, **self._options(self.targets), **kwargs)
        return AsyncResult(self.client, [future], single=True)

    def map_async(self, f, *sequences, chunksize=1, **_ignored):
        futures = self.client._client.map(f, *sequences, chunksize=chunksize, **self._options(self.targets))
        return AsyncMapResult(self.client, futures)


class DirectView(_View):
    """Tasks pinned to engines: apply runs once on each of the view's
    engines (one result, or a list of them for a list of engines)."""

    def __init__(self, client, targets):
        super().__init__(client)
        self.targets = targets

    def apply_async(self, f, *args, **kwargs):
        targets = self.targets if isinstance(self.targets, list) else [self.targets]
        futures = [self.client._client.submit(f, *args, **self._options(t), **kwargs) for t in targets]
        return AsyncResult(self.client, futures, single=not isinstance(self.targets, list))

    def map_async(self, f, *sequences, chunksize=1, **_ignored):
        """The calls spread over the view's engines, in order."""
        targets = self.targets if isinstance(self.targets, list) else [self.targets]
        calls = list(zip(*sequences))
        futures = [self.client._client.submit(f, *call, **self._options(targets[i % len(targets)]))
                   for i, call in enumerate(calls)]
        return AsyncMapResult(self.client, futures)


def _as_ipp_error(exc, engine_id=None):
    """The IPython Parallel error for a ztask TaskError."""
    info = {"engine_id": engine_id if engine_id is not None else getattr(exc, "engine_id", None)}
    if isinstance(exc, _errors.RemoteError):
        return RemoteError(exc.ename, exc.evalue, exc.traceback, info)
    cls = {
        "ImpossibleDependency": error.ImpossibleDependency,
        "InvalidDependency": error.InvalidDependency,
        "TaskTimeout": error.TaskTimeout,
        "TimeLimitExceeded": error.TaskTimeout,
        "EngineError": error.EngineError,
        "TaskAborted": error.TaskAborted,
        "TaskRejected": error.TaskRejected,
        "Unsatisfiable": error.ImpossibleDependency,
    }.get(getattr(exc, "error_type", ""))
    if cls is not None:
        return cls(str(exc))
    return RemoteError(type(exc).__name__, str(exc), "", info)


class Metadata(dict):
    """A task's metadata: a dict whose keys are attributes too
    (`ar.metadata.engine_id`), as IPython Parallel's."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


class AsyncResult:
    """The results of tasks to come: get(timeout), wait, ready, successful,
    msg_ids, metadata."""

    def __init__(self, client, futures, single=False):
        self._client = client
        self._futures = list(futures)
        self._single = single
        self._submitted = time.time()

    @property
    def msg_ids(self):
        return [f.id for f in self._futures]

    def ready(self):
        return all(f.done() for f in self._futures)

    def wait(self, timeout=-1):
        ztask.wait(self._futures, timeout=None if timeout is None or timeout < 0 else timeout)
        return self.ready()

    def successful(self):
        if not self.ready():
            raise AssertionError("not yet done; wait() first")
        return all(not f.cancelled() and f.exception() is None for f in self._futures)

    def get(self, timeout=-1):
        """The result (a list of them for many tasks); raises the task's
        error (a CompositeError for many), or error.TimeoutError."""
        if not self.wait(timeout):
            raise TimeoutError("Result not ready.")
        results, failures = [], []
        for f in self._futures:
            if f.cancelled():
                failures.append(error.TaskAborted("task %s was aborted" % f.id))
                results.append(None)
                continue
            exc = f.exception()
            if exc is not None:
                failures.append(_as_ipp_error(exc, f.engine_id))
                results.append(None)
            else:
                results.append(f.result())
        if self._single:
            if failures:
                raise failures[0]
            return results[0]
        if failures:
            raise CompositeError("one or more exceptions raised in: %d tasks" % len(self._futures), failures)
        return results

    result = get

    def get_dict(self, timeout=-1):
        """{engine_id: result} for tasks on distinct engines."""
        results = self.get(timeout)
        results = [results] if self._single else results
        return {f.engine_id: r for f, r in zip(self._futures, results)}

    @property
    def metadata(self):
        """engine_id, started, completed (datetimes), submitted, status,
        stdout, stderr: a dict per task (one dict for a single task)."""
        out = []
        for f in self._futures:
            record = f.record if f.done() else {}
            entry = Metadata({
                "msg_id": f.id,
                "engine_id": f.engine_id if f.engine_id is not None else record.get("engine_id"),
                "status": record.get("state"),
                "stdout": record.get("stdout", ""),
                "stderr": record.get("stderr", ""),
            })
            for key in ("submitted", "started", "completed"):
                us = record.get(key)
                entry[key] = datetime.datetime.fromtimestamp(us / 1e6) if us else None
            out.append(entry)
        return out[0] if self._single else out

    @property
    def stdout(self):
        """What the task printed (a list of it for many tasks)."""
        md = self.metadata
        return md["stdout"] if self._single else [m["stdout"] for m in md]

    @property
    def stderr(self):
        md = self.metadata
        return md["stderr"] if self._single else [m["stderr"] for m in md]

    @property
    def elapsed(self):
        return time.time() - self._submitted

    def abort(self):
        return self._client.abort(self)

    def __len__(self):
        return len(self._futures)

    def __repr__(self):
        return "<%s: %s>" % (type(self).__name__, "finished" if self.ready() else "pending")


class AsyncMapResult(AsyncResult):
    """A map's results: iterating yields them in order, as each is ready."""

    def __iter__(self):
        for f in self._futures:
            try:
                yield f.result()
            except _errors.TaskError as e:
                raise _as_ipp_error(e, f.engine_id) from None
