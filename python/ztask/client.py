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

import collections
import concurrent.futures
import logging
import os
import sys
import threading
import time

import cloudpickle
import zmq

from . import connection, errors, protocol
from .dependencies import Dependency, dependency_of, ids_of

# Results and arguments of Python function tasks travel as {"pickle": bytes}.
PICKLE_KEY = "pickle"
# How long a hub query may take before it is an error.
QUERY_TIMEOUT_S = 10.0
# A waiting request to the hub is held this long there, then asked again.
HELD_MS = 30_000
# After a reconnection, unanswered tasks are looked up this often.
RESYNC_EVERY_S = 1.0

log = logging.getLogger("ztask")


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

    @property
    def id(self):
        return self._task_id.hex()

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


class _Options:
    """The routing options every kind of task takes, checked; `meta` is
    what goes in a request's metadata frame (packed once for the defaults,
    which most tasks have)."""

    NAMES = ("after", "follow", "targets", "timeout", "time_limit", "retries", "priority", "label")

    def __init__(self, after=None, follow=None, targets=None, timeout=None, time_limit=None, retries=0,
                 priority=0, label=None):
        if targets is None:
            targets = []
        elif isinstance(targets, int) and not isinstance(targets, bool):
            targets = [targets]
        targets = [_int(t, "targets", 0) for t in targets]
        self.label = "" if label is None else str(label)
        self.meta = {
            "after": dependency_of(after).wire(),
            "follow": dependency_of(follow).wire(),
            "targets": targets,
            "timeout": _seconds(timeout, "timeout"),
            "time_limit": _seconds(time_limit, "time_limit"),
            "retries": _int(retries, "retries", 0),
            "priority": _int(priority, "priority"),
        }

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
    return {
        "kind": kind,
        "function": function,
        "args": args,
        "argv": list(argv),
        "cwd": cwd,
        "env": dict(env or {}),
        "label": label,
        "pass_results": None,
    }


_DEFAULTS = (None, None, None, None, None, 0, 0, None)


class Client:
    """A connection to the cluster of `profile_dir` (default: the
    ZTASK_PROFILE_DIR environment variable, else ~/.ztask/profile_default,
    or a connection file's path). Raises ClusterError when there is none."""

    def __init__(self, profile_dir=None, *, max_in_flight=1_000_000):
        self._info = connection.read(profile_dir)
        self._signer = protocol.Signer(self._info.key)
        self._session = protocol.random_id().hex()
        self._max_in_flight = max(1, int(max_in_flight))
        self._io = _Io(self)
        self._closed = False

    # ---- submitting ------------------------------------------------------

    def submit(self, fn, *args, after=None, follow=None, targets=None, timeout=None, time_limit=None, retries=0,
               priority=0, label=None, **kwargs):
        """Runs fn(*args, **kwargs) on an engine; returns its Future."""
        if not callable(fn):
            raise TypeError("submit() needs a callable, not %s" % type(fn).__name__)
        if (after, follow, targets, timeout, time_limit, retries, priority, label) == _DEFAULTS:
            options = _Options.default()
        else:
            options = _Options(after, follow, targets, timeout, time_limit, retries, priority, label)
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
            _settle(p, None if values is None else values[i], exc)

    return done


def _readable(record):
    out = dict(record)
    out["id"] = bytes(record["id"]).hex()
    for side in ("after", "follow"):
        deps = out.get("routing", {}).get(side)
        if deps:
            deps["ids"] = [bytes(i).hex() for i in deps.get("ids", [])]
    return out


class _Io:
    """The thread that owns the client's sockets (see the module's text)."""

    def __init__(self, client):
        self._client = client
        info = client._info
        self._signer = client._signer
        self._context = zmq.Context()
        self._scheduler = self._socket(info, info.scheduler["client"])
        self._hub = self._socket(info, info.hub["query"])
        self._monitor = self._scheduler.get_monitor_socket(zmq.EVENT_CONNECTED)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._posted = collections.deque()
        self._woken = False
        # The I/O thread's own: tasks with no reply (id -> (future, inner
        # frames)), in the order sent; queries waiting for their reply (id ->
        # (future, deadline)); futures of tasks watched on the hub.
        self._unanswered = {}
        self._replies = 0
        self.dropped = 0
        self._in_flight = 0
        self._queries = {}
        self._watched = {}
        self._watch_asked = 0.0
        self._connections = 0
        self._resync_at = None
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="ztask-client", daemon=True)
        self._thread.start()

    def _socket(self, info, endpoint):
        s = self._context.socket(zmq.DEALER)
        s.linger = 1000
        s.sndhwm = 1_000_000
        s.rcvhwm = 0
        info.secure(s)
        s.connect(endpoint)
        return s

    # ---- called from any thread ------------------------------------------

    def _post(self, item):
        with self._lock:
            self._posted.append(item)
            wake = not self._woken
            self._woken = True
        if wake:
            try:
                os.write(self._wake_w, b"x")
            except BlockingIOError:
                pass

    def submit(self, tasks):
        with self._room:
            while self._in_flight + len(tasks) > self._client._max_in_flight and self._in_flight > 0:
                self._room.wait(1.0)
            self._in_flight += len(tasks)
        self._post(("tasks", tasks))

    def watch(self, task_id, future):
        self._post(("watch", (task_id, future)))

    def ask(self, msg_type, content, to_hub, timeout=QUERY_TIMEOUT_S):
        """A request to the hub (or the scheduler); its answer, or None after
        `timeout`, in the returned future. Encoded when sent: the dates of a
        session's messages on one socket must grow."""
        answer = concurrent.futures.Future()
        self._post(("ask", (msg_type, content, to_hub, timeout, answer)))
        return answer

    def close(self):
        self._post(("stop", None))
        self._thread.join(5)
        os.close(self._wake_r)
        os.close(self._wake_w)

    # ---- the thread ----------------------------------------------------------

    def _run(self):
        poller = zmq.Poller()
        poller.register(self._scheduler, zmq.POLLIN)
        poller.register(self._hub, zmq.POLLIN)
        poller.register(self._monitor, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        try:
            self._loop(poller)
        except Exception as e:  # a bug: no future may wait for ever on a dead thread
            log.exception("the ztask client's I/O thread stopped")
            self._fail_everything("the client's I/O thread stopped: %s: %s" % (type(e).__name__, e))
        finally:
            for s in (self._monitor, self._scheduler, self._hub):
                s.close()
            self._context.term()

    def _fail_everything(self, why):
        for task_id, (future, _) in list(self._unanswered.items()):
            _settle(future, exception=errors.ClusterError(why))
        for future in self._watched.values():
            _settle(future, exception=errors.ClusterError(why))
        for answer, _ in self._queries.values():
            answer.set_result(None)
        self._unanswered.clear()
        self._watched.clear()
        self._queries.clear()

    def _loop(self, poller):
        while not self._stopping:
            events = dict(poller.poll(self._poll_ms()))
            if self._wake_r in events:
                try:
                    os.read(self._wake_r, 4096)
                except BlockingIOError:
                    pass
            self._take_posted()
            if self._scheduler in events:
                self._read(self._scheduler)
            if self._hub in events:
                self._read(self._hub)
            if self._monitor in events:
                self._read_monitor()
            self._timers()

    def _poll_ms(self):
        return 100 if (self._queries or self._watched or self._resync_at) else 1000

    def _take_posted(self):
        with self._lock:
            posted, self._posted = self._posted, collections.deque()
            self._woken = False
        batch, size = [], 0
        for kind, item in posted:
            if kind == "tasks":
                for task_id, inner, future in item:
                    self._unanswered[task_id] = (future, inner)
                    batch.append(inner)
                    size += sum(len(f) for f in inner)
                    if len(batch) >= protocol.MAX_BATCH_TASKS or size >= protocol.MAX_BATCH_BYTES:
                        self._send_batch(batch)
                        batch, size = [], 0
            elif kind == "ask":
                msg_type, content, to_hub, timeout, answer = item
                if batch and not to_hub:  # an abort goes after the tasks sent before it
                    self._send_batch(batch)
                    batch, size = [], 0
                head = protocol.header(msg_type, self._client._session)
                self._queries[head["id"]] = (answer, time.monotonic() + timeout)
                frames = protocol.encode_message(self._signer, head, None, {}, content)
                (self._hub if to_hub else self._scheduler).send_multipart(frames, copy=False)
            elif kind == "watch":
                self._watched[item[0]] = item[1]
                self._watch_asked = 0.0
            elif kind == "stop":
                self._stopping = True
        if batch:
            self._send_batch(batch)

    def _send_batch(self, messages):
        head = protocol.header(protocol.TASK_BATCH, self._client._session)
        self._scheduler.send_multipart(protocol.encode_batch(self._signer, head, messages), copy=False)

    def _read(self, socket):
        self._replies = 0
        try:
            self._read_some(socket)
        finally:
            if self._replies:
                self._answered(self._replies)

    def _read_some(self, socket):
        for _ in range(1000):
            try:
                frames = socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                message = protocol.decode_message(self._signer, frames)
                if message.type == protocol.TASK_BATCH:
                    for record in protocol.unpack_batch(frames):
                        inner = protocol.decode_inner(record)
                        if inner.type == protocol.TASK_REPLY:
                            self._on_reply(inner)
                        elif inner.parent is not None:
                            self._on_answer(inner)
                elif message.type == protocol.TASK_REPLY:
                    self._on_reply(message)
                elif message.parent is not None:
                    self._on_answer(message)
            except Exception as e:  # not from our cluster, or broken: dropped
                self.dropped += 1
                if self.dropped == 1:
                    log.warning("dropped a message that cannot be read (%s); further drops are counted "
                                "in Client.dropped", e)

    def _on_reply(self, reply):
        if reply.type != protocol.TASK_REPLY or reply.parent is None:
            return
        task_id = reply.parent["id"]
        entry = self._unanswered.pop(task_id, None)
        if entry is None:
            return  # a reply again after a reconnection, or not ours
        self._replies += 1
        future = entry[0]
        meta = reply.meta
        future.engine_id = meta.get("engine_id")
        value, exc = outcome_of(future._kind, bool(meta.get("ok")), meta.get("error_type"), reply.content, task_id,
                                future.engine_id)
        _settle(future, value, exc)

    def _answered(self, n):
        with self._room:
            self._in_flight -= n
            self._room.notify_all()

    def _on_answer(self, message):
        entry = self._queries.pop(message.parent["id"], None)
        if entry is not None:
            entry[0].set_result(message)
            return
        if message.type == protocol.RESULT_REPLY:
            self._on_records(message.content)

    def _on_records(self, content):
        """Records the hub sent for watched tasks or for a resync."""
        for record in content.get("records", []):
            if not isinstance(record, dict) or record.get("state") not in ("ok", "error"):
                continue
            task_id = bytes(record.get("id", b""))
            future = self._watched.pop(task_id, None)
            kind = future._kind if future is not None else None
            entry = self._unanswered.pop(task_id, None)
            if entry is not None:
                self._answered(1)
                future, kind = entry[0], entry[0]._kind
            if future is None:
                continue
            future.engine_id = record.get("engine_id")
            value, exc = outcome_of(kind, record["state"] == "ok", record.get("error_type"), record, task_id,
                                    future.engine_id)
            _settle(future, value, exc)
        unknown = {bytes(i) for i in content.get("unknown", [])}
        if self._resync_at is not None and unknown:
            # Never recorded: the scheduler that restarted never had them.
            # They go again, in the order first sent, with a new date.
            again = [inner for task_id, (f, inner) in self._unanswered.items() if task_id in unknown]
            for inner in again:
                head = protocol.decode_header(inner[0])
                head["date"] = protocol.now_date()
                inner[0] = protocol.pack(head)
            for i in range(0, len(again), protocol.MAX_BATCH_TASKS):
                self._send_batch(again[i:i + protocol.MAX_BATCH_TASKS])

    def _read_monitor(self):
        while True:
            try:
                self._monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._connections += 1
            if self._connections > 1:
                # Made again: the scheduler may have restarted and lost what
                # it had not recorded. Asked until every task is answered.
                self._resync_at = time.monotonic()

    def _timers(self):
        now = time.monotonic()
        for msg_id, (answer, deadline) in list(self._queries.items()):
            if now > deadline:
                del self._queries[msg_id]
                answer.set_result(None)
        if self._watched and now - self._watch_asked > HELD_MS / 1000:
            self._watch_asked = now
            self._ask_records(list(self._watched), wait=True)
        if self._resync_at is not None and now >= self._resync_at:
            if not self._unanswered:
                self._resync_at = None
            else:
                self._resync_at = now + RESYNC_EVERY_S
                self._ask_records(list(self._unanswered), wait=False)

    def _ask_records(self, ids, wait):
        for i in range(0, len(ids), 10_000):
            content = {"task_ids": ids[i:i + 10_000]}
            if wait:
                content.update({"wait": "final", "wait_ms": HELD_MS})
            head = protocol.header(protocol.RESULT_REQUEST, self._client._session)
            self._hub.send_multipart(protocol.encode_message(self._signer, head, None, {}, content))
