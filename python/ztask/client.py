"""The ztask client: submit Python functions, commands and engine functions
to a cluster and get concurrent.futures Futures for them.

One background thread owns the client's sockets (one to the scheduler, one
to the hub's queries). Submitting encodes the task in the caller's thread
and hands it over; the thread sends everything handed over since its last
turn in one batch (docs/protocol.md, "Batches"), so a loop of submit()
calls batches by itself. Replies settle the futures from that thread.

Thread safety: a Client may be shared by threads; its futures may be waited
on from any thread.
"""

import concurrent.futures
import os
import re
import sys
import time

import cloudpickle

from . import connection, errors, protocol
from ._io import QUERY_TIMEOUT_S, UNREACHABLE_TIMEOUT_S, _Io
from .dependencies import dependency_of
from .futures import PICKLE_KEY, Future, _spread



def _seconds(value, name):
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
        raise ValueError("%s must be a number of seconds >= 0, not %r" % (name, value))
    return protocol.seconds(value)


def _int(value, name, low=None):
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
        raise ValueError("%s must be an integer%s, not %r" % (name, "" if low is None else " >= %d" % low, value))
    return value


def _resources(resources):
    """{"gpus": 1}, checked as the scheduler checks it."""
    if not isinstance(resources, dict):
        raise ValueError("resources must be a dict such as {'gpus': 1}, not %r" % (resources,))
    if len(resources) > protocol.MAX_RESOURCE_NAMES:
        raise ValueError("at most %d resource names" % protocol.MAX_RESOURCE_NAMES)
    out = {}
    for name, units in resources.items():
        if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9_]{1,32}", name) or name == "slots":
            raise ValueError("resource name %r: use lower-case letters, digits and _ (gpus, fpga_cards)" % (name,))
        if _int(units, "resources[%r]" % name, 0) > protocol.MAX_UNITS:
            raise ValueError("resources[%r] must be from 0 to %d" % (name, protocol.MAX_UNITS))
        out[name] = units
    return out


class _Options:
    """The routing options every kind of task takes, checked; `meta` is
    what goes in a request's metadata frame (packed once for the defaults,
    which most tasks have)."""

    NAMES = ("after", "follow", "targets", "timeout", "time_limit", "retries", "priority", "label", "slots",
             "resources")

    def __init__(self, after=None, follow=None, targets=None, timeout=None, time_limit=None, retries=0,
                 priority=0, label=None, slots=1, resources=None):
        if targets is None:
            targets = []
        elif isinstance(targets, int) and not isinstance(targets, bool):
            targets = [targets]
        targets = [_int(t, "targets", 0) for t in targets]
        self.label = "" if label is None else str(label)
        self.meta = protocol.lean({
            "after": dependency_of(after).wire(),
            "follow": dependency_of(follow).wire(),
            "targets": targets,
            "timeout": _seconds(timeout, "timeout"),
            "time_limit": _seconds(time_limit, "time_limit"),
            "retries": _int(retries, "retries", 0),
            "priority": _int(priority, "priority"),
        }, protocol.ROUTING_DEFAULTS)
        # Absent when the defaults, as the other clients send them.
        if _int(slots, "slots", 1) != 1:
            if slots > protocol.MAX_SLOTS:
                raise ValueError("slots must be from 1 to %d, not %d" % (protocol.MAX_SLOTS, slots))
            self.meta["slots"] = slots
        if resources:
            self.meta["resources"] = _resources(resources)

    @staticmethod
    def default():
        global _DEFAULT_OPTIONS
        if _DEFAULT_OPTIONS is None:
            o = _Options()
            o.meta = protocol.Packed(protocol.pack(o.meta))
            _DEFAULT_OPTIONS = o
        return _DEFAULT_OPTIONS


_DEFAULT_OPTIONS = None


def _spec(kind, label, function="", args=None, argv=(), cwd="", env=None):
    return protocol.lean({
        "kind": kind,
        "function": function,
        "args": args,
        "argv": list(argv),
        "cwd": cwd,
        "env": dict(env or {}),
        "label": label,
    }, protocol.SPEC_DEFAULTS)


_DEFAULTS = (None, None, None, None, None, 0, 0, None, 1, None)


class Client:
    """A connection to the cluster of `profile_dir` (default: the
    ZTASK_PROFILE_DIR environment variable, else ~/.ztask/profile_default,
    or a connection file's path), or of `profile` NAME
    (~/.ztask/profile_NAME). Raises ClusterError when there is none."""

    def __init__(self, profile_dir=None, *, profile=None, max_in_flight=1_000_000,
                 unreachable_timeout=UNREACHABLE_TIMEOUT_S):
        if unreachable_timeout is not None:
            _seconds(unreachable_timeout, "unreachable_timeout")
        if profile is not None:
            if profile_dir is not None:
                raise ValueError("give profile_dir or profile, not both")
            profile_dir = connection.named_profile_dir(profile)
        self._info = connection.read(profile_dir)
        self._signer = protocol.Signer(self._info.key)
        self._session = protocol.random_id().hex()
        self._max_in_flight = max(1, int(max_in_flight))
        # Futures still waiting fail with ClusterError once the scheduler has
        # been unreachable this long while they wait (None: never).
        self._unreachable_timeout = unreachable_timeout
        self._io = _Io(self)
        self._closed = False

    # ---- submitting ------------------------------------------------------

    def submit(self, fn, *args, after=None, follow=None, targets=None, timeout=None, time_limit=None, retries=0,
               priority=0, label=None, slots=1, resources=None, **kwargs):
        """Runs fn(*args, **kwargs) on an engine; returns its Future. It
        holds `slots` of its engine's slots and the units of `resources`
        ({"gpus": 1}) while it runs; os.environ has ZTASK_RESOURCE_GPUS."""
        if not callable(fn):
            raise TypeError("submit() needs a callable, not %s" % type(fn).__name__)
        given = (after, follow, targets, timeout, time_limit, retries, priority, label, slots, resources)
        options = _Options.default() if given == _DEFAULTS else _Options(*given)
        args = self._pickled(fn, {"fn": self._pickled_fn(fn), "args": args, "kwargs": kwargs})
        return self._send([("python", _spec("python", options.label, args=args), options.meta)])[0]

    def command(self, argv, cwd=None, env=None, **options):
        """Runs a command (argv, without a shell) on an engine; its result is
        a CommandResult, and a non-zero exit raises TaskFailed."""
        if isinstance(argv, str) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError("command() needs a list of strings, e.g. ['sh', '-c', 'echo hi']")
        if env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise ValueError("env must map strings to strings")
        o = self._options(options)
        spec = _spec("command", o.label, argv=argv, cwd=os.fspath(cwd) if cwd else "", env=env)
        return self._send([("command", spec, o.meta)])[0]

    def call(self, name, args=None, **options):
        """Runs the function `name` registered on the engines (C++), with
        `args` (any msgpack value: None, numbers, strings, lists, dicts)."""
        if not isinstance(name, str) or not name:
            raise ValueError("call() needs the name of a function registered on the engines")
        o = self._options(options)
        try:
            protocol.pack(args)
        except (TypeError, ValueError, OverflowError) as e:
            raise TypeError("the arguments of %s cannot be sent: %s" % (name, e)) from None
        return self._send([("function", _spec("function", o.label, function=name, args=args), o.meta)])[0]

    def map(self, fn, *iterables, chunksize=1, **options):
        """fn over the iterables, as the built-in map: a list of Futures, in
        order. With chunksize > 1, each task runs that many calls."""
        if not callable(fn):
            raise TypeError("map() needs a callable, not %s" % type(fn).__name__)
        chunksize = _int(chunksize, "chunksize", 1)
        o = self._options(options)
        calls = list(zip(*iterables))
        pickled_fn = self._pickled_fn(fn)  # once for the whole map
        if chunksize == 1:
            tasks = [("python", _spec("python", o.label, args=self._pickled(fn, {"fn": pickled_fn, "args": a})),
                      o.meta) for a in calls]
            return self._send(tasks)
        chunks = [calls[i:i + chunksize] for i in range(0, len(calls), chunksize)]
        tasks = [("python", _spec("python", o.label, args=self._pickled(fn, {"fn": pickled_fn, "chunk": c})),
                  o.meta) for c in chunks]
        out = []
        for chunk, whole in zip(chunks, self._send(tasks)):
            parts = [Future(self, whole._task_id, "python") for _ in chunk]
            whole.add_done_callback(_spread(parts))
            out.extend(parts)
        return out

    def _options(self, options):
        if not options:
            return _Options.default()
        unknown = set(options) - set(_Options.NAMES)
        if unknown:
            raise TypeError("unknown option %s (options: %s)" % (", ".join(sorted(unknown)), ", ".join(_Options.NAMES)))
        return _Options(**options)

    @staticmethod
    def _pickled_fn(fn):
        """The function alone, pickled: engines keep what they unpickled by
        these bytes, so the same function is not rebuilt for every task."""
        try:
            return cloudpickle.dumps(fn)
        except Exception as e:
            raise TypeError("cannot send %s to an engine: %s" % (getattr(fn, "__name__", fn), e)) from None

    @staticmethod
    def _pickled(fn, job):
        try:
            data = cloudpickle.dumps(job)
        except Exception as e:
            raise TypeError("cannot send %s to an engine: %s" % (getattr(fn, "__name__", fn), e)) from None
        if len(data) > 64 << 20:
            raise ValueError("the pickled function and arguments are %d bytes, over 64 MiB" % len(data))
        return {PICKLE_KEY: data}

    def _send(self, tasks):
        """Encodes (kind, spec, meta) tasks and hands them to the I/O thread."""
        if self._closed:
            raise errors.ClusterError("this client is closed")
        out = []
        for kind, spec, meta in tasks:
            task_id = protocol.new_task_id()
            head = protocol.header(protocol.TASK_REQUEST, self._session, task_id)
            try:
                inner = protocol.encode_inner(head, None, meta, spec)
            except (TypeError, ValueError, OverflowError) as e:
                raise TypeError("the task cannot be sent: %s" % e) from None
            future = Future(self, task_id, kind)
            out.append((task_id, inner, future))
        self._io.submit(out)
        return [f for _, _, f in out]

    # ---- waiting and reading -----------------------------------------------

    def gather(self, fs, timeout=None):
        """The results of the futures, in order (raises the first error)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        return [f.result(None if deadline is None else max(0, deadline - time.monotonic())) for f in fs]

    def get(self, task_id):
        """A Future for any task of the cluster, by id (hex or a Future).
        Raises ValueError when the cluster has no such task (none recorded
        within a second: one submitted a moment ago may not be yet)."""
        task_id = protocol.id_from(task_id.id if isinstance(task_id, Future) else task_id)
        reply = self._ask_hub(protocol.RESULT_REQUEST, {"task_ids": [task_id], "wait": "recorded", "wait_ms": 1000})
        if reply.content.get("unknown"):
            raise ValueError("the cluster has no task %s" % task_id.hex())
        future = Future(self, task_id, None)
        self._io.watch(task_id, future)
        return future

    def _record(self, task_id, final=False):
        content = {"task_ids": [task_id]}
        if final:
            content.update({"wait": "final", "wait_ms": int(QUERY_TIMEOUT_S * 1000)})
        reply = self._ask_hub(protocol.RESULT_REQUEST, content, QUERY_TIMEOUT_S * (2 if final else 1))
        for record in reply.content.get("records", []):
            return _readable(record)
        raise ValueError("the cluster has no task %s" % task_id.hex())

    def abort(self, fs):
        """Aborts tasks that have not started. Returns {"aborted", "running",
        "finished", "unknown"}: lists of hex ids."""
        ids = [protocol.id_from(f.id if isinstance(f, Future) else f) for f in fs]
        reply = self._io.ask(protocol.ABORT_REQUEST, {"task_ids": ids}, to_hub=False).result(QUERY_TIMEOUT_S + 1)
        if reply is None:
            raise errors.ClusterError("the scheduler did not answer the abort within %g s" % QUERY_TIMEOUT_S)
        return {k: [bytes(i).hex() for i in reply.content.get(k, [])] for k in ("aborted", "running", "finished", "unknown")}

    def engines(self):
        """The engines, as dicts: id, name, host, pid, state, registered."""
        reply = self._ask_hub(protocol.ENGINES_REQUEST, {})
        return [dict(e) for e in reply.content.get("engines", [])]

    @property
    def ids(self):
        """The ids of the running engines."""
        return sorted(e["id"] for e in self.engines() if e.get("state") == "running")

    def status(self):
        """Tasks per engine: {"engines": {id: {"running", "queued",
        "completed"}}, "unassigned": n}."""
        reply = self._ask_hub(protocol.QUEUE_REQUEST, {})
        engines = {
            e["engine_id"]: {k: e.get(k, 0) for k in ("running", "queued", "completed")}
            for e in reply.content.get("engines", [])
        }
        return {"engines": engines, "unassigned": reply.content.get("unassigned", 0)}

    def wait_for_engines(self, n, timeout=30.0):
        """Blocks until n engines are running (TimeoutError after timeout)."""
        deadline = time.monotonic() + timeout
        while len(self.ids) < n:
            if time.monotonic() > deadline:
                raise TimeoutError("%d of %d engines running after %g s" % (len(self.ids), n, timeout))
            time.sleep(0.05)

    def progress(self, fs, file=None):
        """Blocks until the futures are done, showing a bar on a terminal."""
        fs = list(fs)
        out = file or sys.stderr
        bar = None
        if getattr(out, "isatty", lambda: False)():
            try:
                import tqdm

                bar = tqdm.tqdm(total=len(fs), file=out, unit="task")
            except ImportError:
                bar = None
        for _ in concurrent.futures.as_completed(fs):
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()

    def _ask_hub(self, msg_type, content, timeout=QUERY_TIMEOUT_S):
        reply = self._io.ask(msg_type, content, to_hub=True, timeout=timeout).result(timeout + 1)
        if reply is None:
            raise errors.ClusterError(
                "the hub at %s did not answer within %g s; is the cluster running?" % (self._info.hub["query"], timeout)
            )
        return reply

    def close(self):
        """Sends what is queued (for up to a second) and closes the sockets."""
        if not self._closed:
            self._closed = True
            self._io.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _readable(record):
    out = dict(record)
    out["id"] = bytes(record["id"]).hex()
    for side in ("after", "follow"):
        deps = out.get("routing", {}).get(side)
        if deps:
            deps["ids"] = [bytes(i).hex() for i in deps.get("ids", [])]
    return out
