"""The Client's questions to the hub's records, in IPython Parallel's
shapes: hub_history, db_query (with its query operators), queue_status,
result_status, resubmit and the purges. The hub's SQLite records answer;
a query is filtered here, over pages of records."""

import datetime
import re
import time

from ztask import protocol

from .. import error
from ..util import _datetime

PAGE = 10_000

_OPERATORS = {
    "$lt": lambda a, b: a is not None and a < b,
    "$gt": lambda a, b: a is not None and a > b,
    "$lte": lambda a, b: a is not None and a <= b,
    "$gte": lambda a, b: a is not None and a >= b,
    "$ne": lambda a, b: a != b,
    "$eq": lambda a, b: a == b,
    "$in": lambda a, b: a in b,
    "$nin": lambda a, b: a not in b,
    "$exists": lambda a, b: (a is not None) == bool(b),
    "$regex": lambda a, b: a is not None and re.search(b, str(a)) is not None,
}


def matches(record, query):
    """True when a record (IPython Parallel's shape) matches a query such as
    {"submitted": {"$lt": t}, "msg_id": {"$in": ids}}."""
    for key, test in query.items():
        value = record.get(key)
        if isinstance(test, dict) and test and all(k.startswith("$") for k in test):
            for op, operand in test.items():
                check = _OPERATORS.get(op)
                if check is None:
                    raise ValueError("unsupported query operator %s (supported: %s)" % (op, ", ".join(_OPERATORS)))
                if not check(value, operand):
                    return False
        elif value != test:
            return False
    return True


def ipp_record(record, uuids=None):
    """A hub record as IPython Parallel's task record."""
    msg_id = bytes(record["id"]).hex()
    routing = record.get("routing") or {}
    submitted = _datetime(record.get("submitted"))
    state = record.get("state")
    engine_id = record.get("engine_id")
    return {
        "msg_id": msg_id,
        "header": {"msg_id": msg_id, "date": submitted, "msg_type": "apply_request",
                   "session": record.get("client", ""), "username": "", "version": "5.3"},
        "content": {},
        "submitted": submitted,
        "started": _datetime(record.get("started")),
        "completed": _datetime(record.get("completed")),
        "received": _datetime(record.get("completed")),
        "client_uuid": record.get("client", ""),
        "engine_id": engine_id,
        "engine_uuid": (uuids or {}).get(engine_id),
        "status": state,
        "result_header": {"status": {"ok": "ok", "error": "error"}.get(state)} if state in ("ok", "error") else None,
        "label": record.get("label", ""),
        "stdout": record.get("stdout", ""),
        "stderr": record.get("stderr", ""),
        "after": [bytes(i).hex() for i in (routing.get("after") or {}).get("ids", [])],
        "follow": [bytes(i).hex() for i in (routing.get("follow") or {}).get("ids", [])],
        "error": record.get("error_message") or None,
    }


def _spec_task(record):
    """(kind, spec, routing) to submit a command's or a C++ function's
    record again."""
    routing = dict(record.get("routing") or {})
    for side in ("after", "follow"):
        deps = routing.get(side)
        if deps:
            routing[side] = dict(deps, ids=[protocol.id_from(i) for i in deps.get("ids", [])])
    spec = dict(record["spec"])
    return spec.get("kind", "command"), spec, routing


class HubRecords:
    """The Client's methods that read and change the hub's records."""

    def _all_records(self):
        records, after = [], None
        while True:
            content = {"task_ids": [], "limit": PAGE}
            if after is not None:
                content["after"] = after
            reply = self._ztask._ask_hub(protocol.RESULT_REQUEST, content).content
            page = reply.get("records", [])
            records.extend(page)
            if not reply.get("more") or not page:
                return records
            after = reply.get("next") or page[-1]["id"]

    def hub_history(self):
        """Every task id the hub holds, in submission order."""
        records = self._all_records()
        records.sort(key=lambda r: (r.get("submitted") or 0, bytes(r["id"])))
        return [bytes(r["id"]).hex() for r in records]

    def db_query(self, query, keys=None):
        """The hub's records (IPython Parallel's shape) that match `query`;
        `keys`: only these keys (and msg_id)."""
        self._refresh_engines()
        records = [ipp_record(r, self._engines) for r in self._all_records()]
        found = [r for r in records if matches(r, query)]
        found.sort(key=lambda r: r["submitted"] or datetime.datetime.min.replace(tzinfo=datetime.timezone.utc))
        if keys is not None:
            keys = [keys] if isinstance(keys, str) else list(keys)
            wanted = set(keys) | {"msg_id"}
            found = [{k: r.get(k) for k in wanted} for r in found]
        return found

    def queue_status(self, targets="all", verbose=False):
        """{engine_id: {"queue", "completed", "tasks"}, "unassigned": n}; for
        one engine id, its dict."""
        status = self._ztask.status()
        engines = status["engines"]
        ids = self._build_targets(targets if targets is not None else "all")[1]
        out = {}
        for engine_id in ids:
            e = engines.get(engine_id, {})
            out[engine_id] = {"queue": e.get("queued", 0), "completed": e.get("completed", 0),
                              "tasks": e.get("running", 0)}
        if isinstance(targets, int) and not isinstance(targets, bool):
            return out[ids[0]]
        out["unassigned"] = status.get("unassigned", 0)
        return out

    def result_status(self, msg_ids, status_only=True):
        """{"pending": [...], "completed": [...]}, and each completed task's
        result by id unless status_only."""
        msg_ids = [msg_ids] if isinstance(msg_ids, str) else list(msg_ids)
        out = {"pending": [], "completed": []}
        for msg_id in msg_ids:
            future = self._future_of(msg_id)
            if future.done():
                out["completed"].append(msg_id)
                if not status_only:
                    from .asyncresult import _value

                    out[msg_id] = _value(future, None) if future.exception() is None else future.exception()
            else:
                out["pending"].append(msg_id)
        return out

    def resubmit(self, indices_or_msg_ids=None, metadata=None, block=None):
        """Submits tasks again as they were first submitted (from the hub's
        records): an AsyncHubResult of the new tasks."""
        from .asyncresult import AsyncHubResult

        ids = indices_or_msg_ids if indices_or_msg_ids is not None else -1
        ids = [ids] if isinstance(ids, (str, int)) else list(ids)
        msg_ids = [self.history[i] if isinstance(i, int) else i for i in ids]
        requests = []
        for msg_id in msg_ids:
            with self._lock:
                kept = getattr(self._futures.get(msg_id), "_request", None)
            if kept is not None:
                requests.append(kept)
                continue
            try:
                record = self._ztask._record(protocol.id_from(msg_id))
            except ValueError:
                raise error.RemoteError("KeyError", "No such msg: %r" % msg_id) from None
            if not record.get("spec"):
                raise error.RemoteError("KeyError", "%s is a Python task of another client, or one whose results "
                                        "this client no longer holds: the hub keeps no Python task's request"
                                        % msg_id)
            requests.append(record)
        futures = []
        submitted_at = time.time()
        for request in requests:
            if isinstance(request, tuple):
                fn, args, options = request
                future = self._ztask.submit(fn, *args, **options)
                self._remember(future, fn, args, options)
            else:
                future = self._ztask._send([_spec_task(request)])[0]
            futures.append(future)
        self._track(futures, submitted_at=submitted_at)
        ar = AsyncHubResult(self, futures, single=len(futures) == 1)
        if block:
            ar.get()
        return ar

    def purge_hub_results(self, jobs=(), targets=()):
        """Deletes the hub's records of these tasks ("all": of every one)."""
        if jobs == "all" or targets == "all":
            # This client's finished tasks may not be final in the hub yet
            # (it records a moment after the reply): they go too.
            done = [protocol.id_from(m) for m in self.history[-1000:] if m not in self.outstanding]
            if done:
                self._ztask._ask_hub(protocol.RESULT_REQUEST, {"task_ids": done, "wait": "final", "wait_ms": 2000},
                                     timeout=5)
            self._ztask._ask_hub(protocol.PURGE_REQUEST, {"task_ids": [], "all": True})
            return
        if isinstance(jobs, str):
            jobs = [jobs]
        ids = []
        for job in jobs:
            ids.extend(job.msg_ids if hasattr(job, "msg_ids") else [job])
        if targets:
            wanted = set(self._build_targets(targets)[1])
            ids.extend(r["msg_id"] for r in self.db_query({"engine_id": {"$in": list(wanted)}}, keys=["msg_id"]))
        if ids:
            self._ztask._ask_hub(protocol.PURGE_REQUEST, {"task_ids": [protocol.id_from(i) for i in ids],
                                                          "all": False})

    def purge_local_results(self, jobs=(), targets=()):
        """Forgets results this client keeps; RuntimeError for a task still
        outstanding."""
        if jobs == "all":
            if self.outstanding:
                raise RuntimeError("cannot purge outstanding tasks: %s" % sorted(self.outstanding))
            self.results.clear()
            self.metadata.clear()
            return
        if isinstance(jobs, str) or hasattr(jobs, "msg_ids"):
            jobs = [jobs]
        msg_ids = []
        for job in jobs:
            msg_ids.extend(job.msg_ids if hasattr(job, "msg_ids") else [job])
        still = set(msg_ids) & self.outstanding
        if still:
            raise RuntimeError("cannot purge outstanding tasks: %s" % sorted(still))
        for msg_id in msg_ids:
            self.results.pop(msg_id, None)
            self.metadata.pop(msg_id, None)

    def purge_results(self, jobs=(), targets=()):
        self.purge_local_results(jobs, targets)
        self.purge_hub_results(jobs, targets)

    def purge_everything(self):
        self.purge_results("all")
        self.history = []
        self.session.digest_history.clear()
