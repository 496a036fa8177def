"""The client's I/O thread: it owns the client's sockets, sends what
threads hand it (all of a turn's tasks in one batch), and settles futures
from the scheduler's replies and the hub's records.

Only the client (client.py) uses it: submit, watch and ask may be called
from any thread; everything else runs on the thread itself.
"""

import collections
import concurrent.futures
import logging
import os
import threading
import time

import zmq
import zmq.utils.monitor

from . import errors, protocol
from .futures import _settle, outcome_of

# How long a query may take before it is an error.
QUERY_TIMEOUT_S = 10.0
# A waiting request to the hub is held this long there, then asked again.
HELD_MS = 30_000
# After a reconnection, unanswered tasks are looked up this often.
RESYNC_EVERY_S = 1.0
# Futures waiting while the scheduler cannot be reached fail after this
# long (Client(unreachable_timeout=...)): a failover takes a second or two,
# a cluster that was stopped never comes back. Past the notice, the client
# says once that it waits.
UNREACHABLE_TIMEOUT_S = 30.0
UNREACHABLE_NOTICE_S = 5.0

log = logging.getLogger("ztask")


def _outputs_of(body):
    """(started, completed, stdout, stderr) of a reply or a record, kept on
    its future for ztask.compat's metadata (no hub query for them)."""
    get = body.get
    return (get("started"), get("completed"), get("stdout") or "", get("stderr") or "")


class _Io:
    """The thread that owns the client's sockets (see the module's text)."""

    def __init__(self, client):
        self._client = client
        info = client._info
        self._signer = client._signer
        self._context = zmq.Context()
        self._scheduler = self._socket(info)
        # Watched before it connects: an event before the monitor would be
        # missed, and a first connection never seen is a scheduler taken for
        # unreachable.
        self._monitor = self._scheduler.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
        self._scheduler.connect(info.scheduler["client"])
        self._hub = self._socket(info)
        self._hub.connect(info.hub["query"])
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
        # The scheduler's connection: since when it is down (None while up;
        # down until first made), when it was last made or lost (wall
        # clock, for the error), and since when futures wait while it is
        # down, and whether the client said so.
        self._down_since = time.monotonic()
        self._last_seen = None
        self._waiting_since = None
        self._said_waiting = False
        self._stopping = False
        # Who may touch the sockets and the state above: the I/O thread, or
        # a thread leading while it waits (lead_until).
        self._turn = threading.Lock()
        self._lead = threading.Lock()
        self._leader = None
        self._leader_changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="ztask-client", daemon=True)
        self._thread.start()

    def _socket(self, info):
        s = self._context.socket(zmq.DEALER)
        s.linger = 1000
        s.sndhwm = 1_000_000
        s.rcvhwm = 0
        info.secure(s)
        return s

    # ---- called from any thread ------------------------------------------

    def _post(self, item):
        with self._lock:
            self._posted.append(item)
        self._wake()

    def _wake(self):
        with self._lock:
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
        self._poller = zmq.Poller()
        for s in (self._scheduler, self._hub, self._monitor, self._wake_r):
            self._poller.register(s, zmq.POLLIN)
        try:
            while not self._stopping:
                self._yield_to_leader()
                with self._turn:
                    if not self._stopping:
                        self._one_turn(self._poll_ms())
        except Exception as e:  # a bug: no future may wait for ever on a dead thread
            log.exception("the ztask client's I/O thread stopped")
            with self._turn:
                self._fail_everything("the client's I/O thread stopped: %s: %s" % (type(e).__name__, e))
        finally:
            with self._turn:
                self._stopping = True
                # Nothing waits for ever on a closed client.
                self._fail_everything("the client was closed before the task's reply came; its outcome "
                                      "will be in the hub: ztask.Client().get(id)")
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

    def _one_turn(self, timeout_ms):
        """One turn of the loop: wait for the sockets at most `timeout_ms`,
        send what was handed over, read what came. REQUIRES: self._turn."""
        events = dict(self._poller.poll(timeout_ms))
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

    # ---- a waiting thread may drive the loop itself ---------------------------
    #
    # A thread that waits for a future (Future.result) takes the turn from the
    # I/O thread and runs the loop until its future is settled: the reply
    # that settles it is read on the thread that waits for it, not handed
    # over between threads (a thread wake-up each way, about 80 us of a
    # 650 us round trip). One thread leads at a time; others wait as usual.

    def lead_until(self, future, timeout):
        if self._stopping or threading.get_ident() in (self._thread.ident, self._leader):
            return
        if not self._lead.acquire(blocking=False):
            return
        try:
            with self._leader_changed:
                self._leader = threading.get_ident()
            self._wake()  # the I/O thread leaves its poll and yields
            deadline = None if timeout is None else time.monotonic() + timeout
            with self._turn:
                self._take_posted()
                while not future.done() and not self._stopping:
                    left_ms = 100 if deadline is None else min(100, int((deadline - time.monotonic()) * 1000))
                    if left_ms < 0:
                        break
                    self._one_turn(left_ms)
        finally:
            with self._leader_changed:
                self._leader = None
                self._leader_changed.notify_all()
            self._lead.release()

    def _yield_to_leader(self):
        with self._leader_changed:
            while self._leader is not None and not self._stopping:
                self._leader_changed.wait(1.0)

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
        future._outputs = _outputs_of(reply.content)
        value, exc = outcome_of(future._kind, bool(meta.get("ok", True)), meta.get("error_type"), reply.content, task_id,
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
            future._outputs = _outputs_of(record)
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
                inner[0] = protocol.encode_header(head)
            for i in range(0, len(again), protocol.MAX_BATCH_TASKS):
                self._send_batch(again[i:i + protocol.MAX_BATCH_TASKS])

    def _read_monitor(self):
        while True:
            try:
                frames = self._monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                event = zmq.utils.monitor.parse_monitor_message(frames)["event"]
            except Exception:  # not an event libzmq would send
                continue
            if event == zmq.EVENT_DISCONNECTED:
                if self._down_since is None:
                    self._down_since = time.monotonic()
                    self._last_seen = ("lost", time.time())
                continue
            if self._said_waiting:
                log.warning("ztask: the scheduler at %s is reachable again", self._client._info.scheduler["client"])
            self._down_since = None
            self._waiting_since = None
            self._said_waiting = False
            self._last_seen = ("made", time.time())
            self._connections += 1
            if self._connections > 1:
                # Made again: the scheduler may have restarted and lost what
                # it had not recorded. Asked until every task is answered.
                self._resync_at = time.monotonic()

    def _timers(self):
        now = time.monotonic()
        self._check_reachable(now)
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

    def _check_reachable(self, now):
        """Futures that wait while the scheduler cannot be reached: said
        once past UNREACHABLE_NOTICE_S, failed past the client's limit."""
        if self._down_since is None or not (self._unanswered or self._watched):
            self._waiting_since = None
            return
        if self._waiting_since is None:
            self._waiting_since = max(self._down_since, now - 1.0)  # this poll's start, at most
        waited = now - self._waiting_since
        limit = self._client._unreachable_timeout
        endpoint = self._client._info.scheduler["client"]
        profile = os.path.dirname(self._client._info.path)
        if waited >= UNREACHABLE_NOTICE_S and not self._said_waiting:
            self._said_waiting = True
            log.warning("ztask: the scheduler at %s (profile %s) has not been reachable for %d s; %d tasks wait "
                        "for it%s", endpoint, profile, waited, len(self._unanswered) + len(self._watched),
                        "" if limit is None else ", for up to %g s (Client(unreachable_timeout=...))" % limit)
        if limit is None or waited < limit:
            return
        if self._last_seen is None:
            seen = "it was never reached"
        else:
            seen = "its connection was %s at %s" % (
                "made" if self._last_seen[0] == "made" else "lost",
                time.strftime("%H:%M:%S", time.localtime(self._last_seen[1])))
        why = ("the scheduler of the cluster in %s (%s) has not been reachable for %g s (%s): is the cluster "
               "running? (taskcluster status --profile-dir %s). If the task ran, its outcome is in the hub: "
               "ztask.Client().get(id)" % (profile, endpoint, limit, seen, profile))
        failed = len(self._unanswered)
        for future, _ in self._unanswered.values():
            _settle(future, exception=errors.ClusterError(why))
        for future in self._watched.values():
            _settle(future, exception=errors.ClusterError(why))
        self._unanswered.clear()
        self._watched.clear()
        self._waiting_since = None
        self._said_waiting = False
        if failed:
            self._answered(failed)

    def _ask_records(self, ids, wait):
        for i in range(0, len(ids), 10_000):
            content = {"task_ids": ids[i:i + 10_000]}
            if wait:
                content.update({"wait": "final", "wait_ms": HELD_MS})
            head = protocol.header(protocol.RESULT_REQUEST, self._client._session)
            self._hub.send_multipart(protocol.encode_message(self._signer, head, None, {}, content))
