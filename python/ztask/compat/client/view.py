"""IPython Parallel's views over ztask: every call is a task (scheduled,
recorded, timed out like any other) that runs in an engine's long-lived
Python worker, in that engine's namespace (ztask_worker.ns_*).

A DirectView's tasks are pinned to its engines, which run them in the
order they were submitted; its namespace operations (push, pull, execute,
scatter, gather, view[name]) are such tasks. A LoadBalancedView's go to
whichever engine the scheduler picks.
"""

import builtins
import contextlib
import functools
import sys
import time
import warnings

import ztask_worker

from ..dependency import to_ztask
from .asyncresult import AsyncMapResult, AsyncResult
from .executor import IMapIterator, LazyMapIterator, ViewExecutor
from .remotefunction import ParallelFunction, RemoteFunction

__all__ = ["View", "DirectView", "LoadBalancedView", "BroadcastView", "LazyMapIterator", "ViewExecutor"]


def partition(seq, parts, index):
    """The index-th of `parts` contiguous blocks of seq, as even as can be."""
    n = len(seq)
    base, extra = divmod(n, parts)
    lo = index * base + min(index, extra)
    return seq[lo:lo + base + (1 if index < extra else 0)]


class View:
    """The flags and calls every view shares."""

    _FLAGS = ("targets", "block", "track", "after", "follow", "timeout", "retries", "label")

    def __init__(self, client, targets=None, **flags):
        self.client = client
        self.targets = targets
        self.block = False
        self.track = False
        self.after = None
        self.follow = None
        self.timeout = None
        self.retries = 0
        self.label = None
        self.history = []
        self.results = {}
        self.set_flags(**flags)

    def set_flags(self, **kwargs):
        """Sets flags (block, targets, after, follow, timeout, retries,
        label, track); returns the view."""
        for name, value in kwargs.items():
            if name not in self._FLAGS:
                raise KeyError("Invalid name: %r (flags: %s)" % (name, ", ".join(self._FLAGS)))
            setattr(self, name, value)
        return self

    @contextlib.contextmanager
    def temp_flags(self, **kwargs):
        saved = {name: getattr(self, name) for name in kwargs if name in self._FLAGS}
        self.set_flags(**kwargs)
        try:
            yield
        finally:
            for name, value in saved.items():
                setattr(self, name, value)

    def _options(self, targets):
        return {"after": to_ztask(self.after), "follow": to_ztask(self.follow), "timeout": self.timeout or None,
                "retries": self.retries or 0, "targets": targets, "label": self.label}

    def _submit(self, fn, *args, target=None, targets=None, method="apply", code=None):
        """One task of `fn(*args)` (a ztask_worker.ns_* function)."""
        pinned = [target] if target is not None else targets
        if target is not None and target in self.client._lost_namespaces:
            self.client._lost_namespaces.discard(target)
            warnings.warn("engine %d's Python worker was started again (a task crashed it or ran past its time "
                          "limit): its namespace is a new one, and what was pushed there before is gone" % target,
                          RuntimeWarning, stacklevel=4)
        options = self._options(pinned)
        if method == "execute" and target is not None:
            options["after"] = self.client._after_executes(target, options["after"])
        submitted_at = time.time()
        future = self.client._ztask.submit(fn, *args, **options)
        future._target = target
        if method == "execute" and target is not None:
            self.client._last_execute[target] = future
        self.client._remember(future, fn, args, options)
        self.client._track([future], engine_id=target, submitted_at=submitted_at, method=method,
                           code=code)
        self.history.append(future.id)
        return future

    def _apply(self, f, args, kwargs, target=None, targets=None):
        return self._submit(ztask_worker.ns_apply, self.client._mode, f, args, kwargs, target=target,
                            targets=targets)

    @staticmethod
    def _block(ar, block):
        return ar.get() if block else ar

    # ---- apply and map --------------------------------------------------------

    def apply(self, f, /, *args, **kwargs):
        """f(*args, **kwargs): its result when the view blocks, else an
        AsyncResult."""
        return self._block(self.apply_async(f, *args, **kwargs), self.block)

    def apply_sync(self, f, /, *args, **kwargs):
        return self.apply_async(f, *args, **kwargs).get()

    def map(self, f, *sequences, block=None, **kwargs):
        block = self.block if block is None else block
        return self._block(self.map_async(f, *sequences, **kwargs), block)

    def map_sync(self, f, *sequences, **kwargs):
        return self.map_async(f, *sequences, **kwargs).get()

    def imap(self, f, *sequences, ordered=True, max_outstanding="auto", return_exceptions=False):
        """Like map, lazily: submits at most max_outstanding calls ahead of
        the results taken; returns an iterator with cancel()."""
        if max_outstanding == "auto":
            max_outstanding = 2 * max(1, len(self))
        return IMapIterator(self, f, sequences, ordered, max_outstanding, return_exceptions)

    def remote(self, block=None, **flags):
        """Decorates a function so that calling it runs it on the view."""
        return lambda f: RemoteFunction(self, f, block=block, **flags)

    def parallel(self, dist="b", block=None, ordered=True, **flags):
        """Decorates a function so that calling it (or its .map) maps it
        over sequences on the view."""
        return lambda f: ParallelFunction(self, f, dist=dist, block=block, ordered=ordered, **flags)

    @property
    def executor(self):
        return ViewExecutor(self)

    # ---- waiting and bookkeeping ------------------------------------------------

    @property
    def outstanding(self):
        return set(self.history) & self.client.outstanding

    def wait(self, jobs=None, timeout=-1):
        if jobs is None:
            jobs = [m for m in self.history if m in self.client.outstanding]
        return self.client.wait(jobs, timeout)

    def abort(self, jobs=None, targets=None, block=None):
        if jobs is None:
            jobs = [m for m in self.history if m in self.client.outstanding]
        if isinstance(jobs, (list, tuple)) and not jobs:
            return None
        return self.client.abort(jobs)

    def get_result(self, indices_or_msg_ids=None, block=None, owner=True):
        return self.client.get_result(indices_or_msg_ids, block=block, owner=owner)

    def queue_status(self, targets=None, verbose=False):
        return self.client.queue_status(targets if targets is not None else self.targets, verbose)

    def shutdown(self, targets=None, restart=False, hub=False, block=None):
        return self.client.shutdown(targets if targets is not None else self.targets, restart, hub, block)

    def spin(self):
        pass

    def use_pickle(self):
        """Functions defined interactively run with the engine's namespace
        as globals (IPython Parallel's default)."""
        self.client._mode = "pickle"

    def use_cloudpickle(self):
        """Functions defined interactively keep the globals they were sent
        with (cloudpickle's way)."""
        self.client._mode = "cloudpickle"

    use_dill = use_cloudpickle

    def register_joblib_backend(self, name="ipyparallel", make_default=False):
        from ._joblib import register

        register(name, make_default, view=self)

    def __len__(self):
        return len(self.client.ids) if self.targets is None else len(self._engines())

    def __repr__(self):
        return "<%s %s>" % (type(self).__name__, "None" if self.targets is None else self.targets)


class LoadBalancedView(View):
    """Tasks go to whichever engine the scheduler picks (among `targets`)."""

    def _targets(self):
        if self.targets is None:
            return None
        return self.client._build_targets(self.targets)[1]

    def _engines(self):
        return self._targets() or self.client.ids

    def apply_async(self, f, /, *args, **kwargs):
        future = self._apply(f, args, kwargs, targets=self._targets())
        return AsyncResult(self.client, [future], fname=getattr(f, "__name__", "f"), single=True)

    def map_async(self, f, *sequences, chunksize=1, ordered=True, return_exceptions=False, **_ignored):
        """One task per call (or per `chunksize` calls), in order."""
        calls = [tuple(c) for c in zip(*sequences)]
        options = self._options(self._targets())
        fn = functools.partial(ztask_worker.ns_apply, self.client._mode, f)
        submitted_at = time.time()
        futures = self.client._ztask.map(fn, calls, [{}] * len(calls), chunksize=chunksize, **options) if calls \
            else []
        self.client._track(futures, submitted_at=submitted_at)
        if chunksize == 1:
            for future, call in zip(futures, calls):
                self.client._remember(future, fn, (call, {}), options)
        self.history.extend(f.id for f in futures)
        return AsyncMapResult(self.client, futures, fname=getattr(f, "__name__", "f"), ordered=ordered,
                              return_exceptions=return_exceptions)


class DirectView(View):
    """Tasks pinned to engines: apply runs once on each of the view's
    engines (one result for an int target, a list for a list or "all"),
    in each engine's namespace."""

    def _engines(self):
        return self.client._build_targets(self.targets)[1]

    def _single(self):
        return isinstance(self.targets, int) and not isinstance(self.targets, bool)

    def _each(self, fn, *args, method="apply", code=None, targets=None):
        engines = self._engines() if targets is None else self.client._build_targets(targets)[1]
        return [self._submit(fn, *args, target=t, method=method, code=code) for t in engines]

    def _result(self, futures, block, targets=None, **kwargs):
        single = self._single() if targets is None else isinstance(targets, int)
        ar = AsyncResult(self.client, futures, single=single and len(futures) == 1, **kwargs)
        block = self.block if block is None else block
        return self._block(ar, block)

    def apply_async(self, f, /, *args, **kwargs):
        futures = [self._apply(f, args, kwargs, target=t) for t in self._engines()]
        return AsyncResult(self.client, futures, fname=getattr(f, "__name__", "f"),
                           single=self._single() and len(futures) == 1)

    def map_async(self, f, *sequences, return_exceptions=False, **_ignored):
        """The sequences split in one block per engine; each engine maps f
        over its block; the results come back in order."""
        sequences = [s if hasattr(s, "__len__") and hasattr(s, "__getitem__") else list(s) for s in sequences]
        n = min((len(s) for s in sequences), default=0)
        engines = self._engines()
        futures, sizes = [], []
        for i, t in enumerate(engines):
            blocks = [partition(s[:n] if len(s) != n else s, len(engines), i) for s in sequences]
            if len(blocks[0]) == 0 and n:
                continue
            futures.append(self._submit(ztask_worker.ns_map, self.client._mode, f, blocks, target=t))
            sizes.append(len(blocks[0]))
            if not n:
                break
        ar = AsyncMapResult(self.client, futures, fname=getattr(f, "__name__", "f"), chunked=True,
                            return_exceptions=return_exceptions)
        ar._count, ar._sizes = n, sizes
        return ar

    # ---- the namespace ------------------------------------------------------------

    def push(self, ns, targets=None, block=None, track=None):
        """Sets names in the engines' namespaces."""
        futures = self._each(ztask_worker.ns_push, dict(ns), self.client._mode, targets=targets)
        return self._result(futures, block, targets)

    def update(self, ns):
        return self.push(ns)

    def pull(self, names, targets=None, block=None):
        """The value of a name (or a list of values for a list of names) on
        each engine."""
        futures = self._each(ztask_worker.ns_pull, names, targets=targets)
        return self._result(futures, block, targets)

    def get(self, key_or_keys):
        return self.pull(key_or_keys, block=True)

    def __getitem__(self, key):
        if isinstance(key, str):
            return self.pull(key, block=True)
        raise TypeError("view[name]: a name (a string), not %r" % (key,))

    def __setitem__(self, key, value):
        self.push({key: value}, block=True)

    def execute(self, code, silent=True, targets=None, block=None):
        """Runs code on the engines: an AsyncResult of ExecuteReplies."""
        from .execute import ExecuteReply

        futures = self._each(ztask_worker.ns_execute, code, silent, method="execute", code=code, targets=targets)
        ar = self._result(futures, False, targets, method="execute", fname="execute", transform=ExecuteReply.of)
        return self._wait(ar, block)

    def _wait(self, ar, block):
        """Waits when the view blocks (raising the tasks' errors), and
        returns the AsyncResult either way, as execute and run do."""
        if self.block if block is None else block:
            ar.get()
        return ar

    def run(self, filename, targets=None, block=None):
        """Runs a file (read here) on the engines."""
        with open(filename) as f:
            code = f.read()
        futures = self._each(ztask_worker.ns_run, code, filename, method="execute", targets=targets)
        return self._wait(self._result(futures, False, targets, method="execute"), block)

    def scatter(self, key, seq, dist="b", flatten=False, targets=None, block=None, track=None):
        """Splits seq in one block per engine, as `key` on each (with
        flatten, a block of one element is that element)."""
        engines = self._engines() if targets is None else self.client._build_targets(targets)[1]
        if not hasattr(seq, "__getitem__"):
            seq = list(seq)
        futures = [self._submit(ztask_worker.ns_scatter, key, partition(seq, len(engines), i), flatten, target=t)
                   for i, t in enumerate(engines)]
        ar = AsyncResult(self.client, futures, single=False)
        block = self.block if block is None else block
        return self._block(ar, block)

    def gather(self, key, dist="b", targets=None, block=None):
        """The blocks of `key` on each engine, joined in engine order."""
        futures = self._each(ztask_worker.ns_pull, key, targets=targets)
        ar = AsyncMapResult(self.client, futures, fname="gather", chunked=True)
        ar._transform = lambda value, child: value if isinstance(value, list) else (
            list(value) if hasattr(value, "__iter__") and not isinstance(value, (str, bytes)) else [value])
        block = self.block if block is None else block
        return self._block(ar, block)

    def clear(self, targets=None, block=None):
        return self.client.clear(targets if targets is not None else self.targets, block)

    @contextlib.contextmanager
    def sync_imports(self, local=True, quiet=False):
        """Imports in the with block also run on the engines (into their
        namespaces)."""
        frame = sys._getframe(2)
        original = builtins.__import__

        def view_import(name, globals=None, locals=None, fromlist=(), level=0):
            module = original(name, globals, locals, fromlist, level) if local else None
            if sys._getframe(1) is frame and level == 0:
                if not quiet:
                    shown = "%s from %s" % (", ".join(fromlist), name) if fromlist else name
                    print("importing %s on engine(s)" % shown)
                self._each(ztask_worker.ns_import, name, list(fromlist or ()), level)
            return module

        builtins.__import__ = view_import
        try:
            yield
        finally:
            builtins.__import__ = original

    @property
    def importer(self):
        return self.sync_imports()

    def activate(self, suffix=""):
        """Registers %px, %%px, %autopx, %pxresult and %pxconfig (named
        with `suffix`) for this view in the running IPython."""
        from IPython import get_ipython

        from ..magics import ParallelMagics

        ip = get_ipython()
        if ip is None:
            raise RuntimeError("activate() needs a running IPython")
        ip.register_magics(ParallelMagics(ip, self, suffix))


class BroadcastView(DirectView):
    """A DirectView (ztask sends each engine its own task)."""

    def __init__(self, client, targets="all", is_coalescing=False, **flags):
        super().__init__(client, targets=targets, **flags)
        self.is_coalescing = is_coalescing
