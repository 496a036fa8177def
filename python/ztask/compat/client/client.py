"""IPython Parallel's Client over a ztask cluster: engines by id or by
index (`rc[-1]` is the last engine), views, the client's own history and
results, waiting, aborting, the hub's records (get_result, resubmit,
db_query, hub_history, purge), queue_status, and the engines' namespaces
(clear, send_signal, shutdown).

Thread safety: as ztask.Client's; the bookkeeping of outstanding tasks is
updated from the client's I/O thread under a lock.
"""

import collections
import concurrent.futures
import os
import threading
import time
import weakref

import ztask

from .. import error
from .asyncresult import AsyncHubResult, AsyncResult
from .dask import DaskBridge
from .hub import HubRecords
from .metadata import Metadata, metadata_of, stamp
from .processes import EngineProcesses
from .view import BroadcastView, DirectView, LoadBalancedView

import ztask_worker

__all__ = ["Client", "is_local_ip"]


from ..util import is_local_ip  # noqa: E402  (a name programs patch here)


def _ipython_dir():
    return os.environ.get("IPYTHONDIR") or os.path.join(os.path.expanduser("~"), ".ipython")


def profile_location(profile=None, profile_dir=None, url_file=None, ipython_dir=None):
    """Where the cluster's connection file is: a profile directory or file
    given, else profile NAME in IPython's directory (where ipp.Cluster
    starts clusters) when a cluster runs there, else ~/.ztask/profile_NAME;
    with no name, ZTASK_PROFILE_DIR or ztask's default profile."""
    if profile_dir or url_file:
        return profile_dir or url_file
    from ztask import connection

    if profile is None:
        if os.environ.get("ZTASK_PROFILE_DIR"):
            return os.environ["ZTASK_PROFILE_DIR"]
        candidates = [connection.default_profile_dir(), os.path.join(ipython_dir or _ipython_dir(), "profile_default")]
    else:
        candidates = [os.path.join(ipython_dir or _ipython_dir(), "profile_" + profile),
                      connection.named_profile_dir(profile)]
    for where in candidates:
        if os.path.exists(os.path.join(where, connection.FILE_NAME)):
            return where
    return candidates[0]


class _Session:
    """What programs read of IPython Parallel's session: its key."""

    def __init__(self, key):
        self.key = key
        self.digest_history = set()


class Client(HubRecords, EngineProcesses, DaskBridge):
    """Connects to a ztask cluster: `profile_dir`, a connection file
    (`url_file`), or `profile` NAME; see profile_location."""

    def __new__(cls, *args, **kwargs):
        # Defined so that patching and restoring __new__ (as tests do)
        # leaves one that takes the constructor's arguments.
        return super().__new__(cls)

    def __init__(self, url_file=None, profile=None, profile_dir=None, ipython_dir=None, context=None, debug=False,
                 timeout=10, cluster=None, cluster_id=None, **_ignored):
        if cluster is not None:
            profile_dir = profile_dir or cluster.profile_dir_of_cluster()
        elif cluster_id:
            from ..cluster import cluster_profile_dir

            profile_dir = profile_dir or cluster_profile_dir(profile_location(profile, None, url_file, ipython_dir),
                                                             cluster_id)
        self._ztask = ztask.Client(profile_location(profile, profile_dir, url_file, ipython_dir))
        self._client = self._ztask  # the name earlier versions of ztask.compat used
        self.session = _Session(self._ztask._info.key)
        self.history = []
        self.results = _Results(self)
        self.metadata = _MetadataByTask(self)
        self._lock = threading.Lock()
        self._outstanding = {}  # msg_id -> future
        self._outstanding_dict = collections.defaultdict(set)  # engine uuid -> msg_ids
        self._engines = {}
        self._mode = "pickle"
        self._last_execute = {}  # engine id -> the latest execute's future
        self._lost_namespaces = set()  # engines whose Python worker died since this client last used them
        self._futures = weakref.WeakValueDictionary()  # msg_id -> future, while some result holds it
        self.debug = debug
        self._refresh_engines()
        if timeout:
            deadline = time.monotonic() + timeout
            while not self._engines and time.monotonic() < deadline:
                time.sleep(0.05)
                self._refresh_engines()
        self._activate_magics()

    # ---- engines ---------------------------------------------------------------

    def _refresh_engines(self, failed=False):
        """The running engines' ids (and, with failed, the names of those
        their supervisor gave up)."""
        engines = self._ztask.engines()
        self._engines = {e["id"]: e.get("uuid") or e.get("name") for e in engines if e.get("state") == "running"}
        if failed:
            return sorted(self._engines), {e.get("name") for e in engines if e.get("state") == "failed"}
        return sorted(self._engines)

    def _engine_uuid(self, engine_id):
        if engine_id not in self._engines:
            self._refresh_engines()
        return self._engines.get(engine_id)

    @property
    def ids(self):
        """The ids of the running engines, in order (a new list)."""
        return self._refresh_engines()

    @property
    def _ids(self):
        return sorted(self._engines)

    def __len__(self):
        return len(self.ids)

    def __iter__(self):
        for engine_id in self.ids:
            yield self.direct_view(engine_id)

    def _build_targets(self, targets):
        """(engine uuids, engine ids) for targets: None or "all", an id (a
        negative one counts from the last engine), a slice, or a list."""
        ids = self.ids
        if targets is None or targets == "all":
            targets = ids
        elif isinstance(targets, slice):
            targets = ids[targets]
        elif isinstance(targets, int) and not isinstance(targets, bool):
            targets = [self._engine_id(targets, ids)]
        elif isinstance(targets, (list, tuple, range)):
            targets = [self._engine_id(t, ids) for t in targets]
        else:
            raise TypeError("targets must be an int, a slice, a list of ints, None or 'all', not %r" % (targets,))
        return [self._engines.get(t, str(t)).encode() for t in targets], targets

    def _engine_id(self, index, ids):
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError("an engine id must be an int, not %r" % (index,))
        if index < 0:
            if -index > len(ids):
                raise IndexError("no engine at index %d (%d engines)" % (index, len(ids)))
            return ids[index]
        if index not in ids:
            raise IndexError("No such engine: %d (engines: %s)" % (index, ids))
        return index

    def __getitem__(self, key):
        """client[i] (an id; negative: from the last engine), client[a:b],
        client[[i, j]]: a DirectView."""
        if isinstance(key, str):
            raise TypeError("engine ids are ints, not %r" % key)
        if key is None:
            raise TypeError("client[None]: give an engine id, a slice or a list of ids")
        if isinstance(key, int) and not isinstance(key, bool):
            return self.direct_view(self._engine_id(key, self.ids))
        if isinstance(key, slice):
            return self.direct_view(self.ids[key])
        return self.direct_view(self._build_targets(key)[1])

    def wait_for_engines(self, n=None, timeout=-1, block=True, interactive=None, widget=None):
        """Waits until n engines (default: those of the cluster) run;
        TimeoutError after `timeout`. block=False: a Future."""
        if n is None:
            n = len(self.ids)
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout

        failed_before = self._refresh_engines(failed=True)[1]

        def wait():
            while True:
                running, failed = self._refresh_engines(failed=True)
                if len(running) >= n:
                    return
                if deadline is not None and time.monotonic() > deadline:
                    raise error.TimeoutError("%d engines running, not %d, after %g s" % (len(running), n, timeout))
                failed -= failed_before
                if failed:  # given up by their supervisor while we wait: they will not come
                    raise error.EngineError("engines %s failed (their supervisor gave them up) while waiting for "
                                            "%d engines; %d run" % (sorted(failed), n, len(self._engines)))
                time.sleep(0.05)

        if block:
            return wait()
        future = concurrent.futures.Future()

        def run():
            try:
                wait()
            except BaseException as e:
                future.set_exception(e)
            else:
                future.set_result(None)

        if len(self.ids) >= n:
            future.set_result(None)
        else:
            threading.Thread(target=run, daemon=True).start()
        return future

    # ---- views ---------------------------------------------------------------------

    def load_balanced_view(self, targets=None, **kwargs):
        if targets == "all":
            targets = None
        if targets is not None:
            targets = self._build_targets(targets)[1]
        return LoadBalancedView(self, targets=targets, **kwargs)

    def direct_view(self, targets="all", **kwargs):
        """A view on engines (resolved at each call when "all")."""
        if isinstance(targets, int) and not isinstance(targets, bool) and targets < 0:
            targets = self._engine_id(targets, self.ids)
        return DirectView(self, targets=targets, **kwargs)

    def broadcast_view(self, targets="all", is_coalescing=False, **kwargs):
        return BroadcastView(self, targets=targets, is_coalescing=is_coalescing, **kwargs)

    def executor(self, targets=None):
        return self.load_balanced_view(targets).executor

    def activate(self, targets="all", suffix=""):
        """A DirectView whose %px magics (named with `suffix`) IPython runs."""
        view = self.direct_view(targets)
        view.block = True
        view.activate(suffix)
        return view

    def _activate_magics(self):
        try:
            from IPython import get_ipython
        except ImportError:
            return
        ip = get_ipython()
        if ip is None:
            return
        from ..magics import ParallelMagics

        if "px" not in ip.magics_manager.magics.get("line", {}):
            ip.register_magics(ParallelMagics(ip, self.direct_view("all"), suffix=""))

    # ---- bookkeeping of what this client submitted ---------------------------------

    def _track(self, futures, engine_id=None, submitted_at=None, **compat):
        """Records futures this client submitted (history, outstanding);
        `submitted_at`: time.time() before they were sent."""
        uuid = self._engine_uuid(engine_id) if engine_id is not None else None
        with self._lock:
            for f in futures:
                stamp(f, submitted_at, **compat)
                self.history.append(f.id)
                self._outstanding[f.id] = f
                self._futures[f.id] = f
                if uuid is not None:
                    self._outstanding_dict[uuid].add(f.id)
        for f in futures:
            f.add_done_callback(lambda f, uuid=uuid: self._finished(f, uuid))
        return futures

    def _after_executes(self, engine_id, after):
        """An execute waits for this client's previous execute on its engine
        while that one is outstanding, and fails if that one fails: code
        queued behind an error does not run (IPython Parallel's engines
        abort what was queued after a failed execute)."""
        previous = self._last_execute.get(engine_id)
        if previous is None or previous.done():
            return after
        if after is None:
            return ztask.Dependency([previous])
        return ztask.Dependency(list(after.ids) + [previous._task_id], all=after.all, success=after.success,
                                failure=after.failure) if after.all and after.success and not after.failure \
            else after

    @staticmethod
    def _remember(future, fn, args, options):
        """What a task was asked to run, for resubmit (the hub keeps no
        Python task's request): kept on its future, as long as a result
        holds that."""
        future._request = (fn, args, options)

    def _finished(self, future, uuid):
        with self._lock:
            self._outstanding.pop(future.id, None)
            if uuid is not None:
                self._outstanding_dict[uuid].discard(future.id)

    def _forget(self, ar):
        """An AsyncResult that owns its results took them."""

    @property
    def outstanding(self):
        with self._lock:
            return set(self._outstanding)

    def _futures_of(self, jobs):
        """ztask futures for AsyncResults, msg_ids, history indices and
        futures."""
        if jobs is None:
            with self._lock:
                return list(self._outstanding.values())
        if isinstance(jobs, (AsyncResult, str, int, concurrent.futures.Future)):
            jobs = [jobs]
        out = []
        for job in jobs:
            if isinstance(job, AsyncResult):
                out.extend(job._children)
            elif isinstance(job, concurrent.futures.Future):
                out.append(job)
            elif isinstance(job, int):
                out.append(self._future_of(self.history[job]))
            else:
                out.append(self._future_of(job))
        return out

    def _future_of(self, msg_id):
        with self._lock:
            future = self._futures.get(msg_id)
        return future if future is not None else self._ztask.get(msg_id)

    def wait(self, jobs=None, timeout=-1):
        """Waits for tasks (default: every one this client has outstanding);
        True when they are all done in time."""
        futures = self._futures_of(jobs)
        timeout = None if timeout is None or timeout < 0 else timeout
        _, not_done = concurrent.futures.wait(futures, timeout=timeout)
        return not not_done

    def wait_interactive(self, jobs=None, interval=1.0, timeout=-1):
        futures = self._futures_of(jobs)
        return AsyncResult(self, [f for f in futures if isinstance(f, ztask.Future)], owner=False,
                           single=False).wait_interactive(interval=interval, timeout=timeout)

    def abort(self, jobs=None, targets=None, block=None):
        """Aborts tasks that have not started (default: every outstanding
        one of this client, or those on `targets`)."""
        if jobs is None and targets is not None:
            wanted = set(self._build_targets(targets)[1])
            futures = [f for f in self._futures_of(None) if getattr(f, "_target", None) in wanted]
        else:
            futures = self._futures_of(jobs)
        futures = [f for f in futures if isinstance(f, ztask.Future)]
        if not futures:
            return None
        return self._ztask.abort(futures)

    def clear(self, targets=None, block=None):
        """Empties the engines' namespaces."""
        view = self.direct_view(targets if targets is not None else "all")
        ar = view.apply_async(ztask_worker.ns_clear)
        if block:
            ar.get()
        return ar

    def get_result(self, indices_or_msg_ids=None, block=None, owner=True):
        """An AsyncResult for tasks by msg_id or history index (default:
        the latest): this client's own, else the hub's (AsyncHubResult)."""
        if indices_or_msg_ids is None:
            indices_or_msg_ids = -1
        ids = indices_or_msg_ids
        single = not isinstance(ids, (list, tuple))
        items = [ids] if single else list(ids)
        msg_ids = []
        for item in items:
            if isinstance(item, AsyncResult):
                msg_ids.extend(item.msg_ids)
                single = single and len(item.msg_ids) == 1
            elif isinstance(item, int):
                msg_ids.append(self.history[item])
            else:
                msg_ids.append(item)
        with self._lock:
            own = [self._futures.get(m) for m in msg_ids]
        futures = [f if f is not None else self._ztask.get(m) for f, m in zip(own, msg_ids)]
        for f in futures:
            if not hasattr(f, "_submitted_at"):
                stamp(f)
        cls = AsyncResult if owner else AsyncHubResult
        ar = cls(self, futures, single=single and len(futures) == 1, owner=owner)
        if block:
            ar.get()
        return ar

    def spin(self):
        pass

    def spin_thread(self, interval=1):
        pass

    def stop_spin_thread(self):
        pass

    def close(self, linger=None):
        if self._dask_scheduler is not None:
            try:  # what become_dask started goes with it
                self.stop_dask()
            except Exception:
                pass
        self._ztask.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<Client: %s engines>" % len(self._engines)


class _Results(dict):
    """client.results: what was put there, and the result of any task of
    this client that a result still holds, by msg_id."""

    def __init__(self, client):
        super().__init__()
        self._client = weakref.proxy(client)

    def __missing__(self, msg_id):
        future = self._client._futures.get(msg_id)
        if future is None or not future.done() or future.cancelled() or future.exception() is not None:
            raise KeyError(msg_id)
        from .asyncresult import _value

        return _value(future, None)


class _MetadataByTask(dict):
    """client.metadata: a task's metadata by msg_id (that of any task of
    this client that a result still holds; an empty one for another id, kept,
    as IPython Parallel's dict of them does)."""

    def __init__(self, client):
        super().__init__()
        self._client = weakref.proxy(client)

    def __missing__(self, msg_id):
        future = self._client._futures.get(msg_id)
        if future is not None:
            return metadata_of(future, self._client)  # not kept: it changes until the task is done
        md = self[msg_id] = Metadata(msg_id=msg_id)
        return md
