"""Client.become_dask: the engines as the workers of a dask.distributed
cluster whose scheduler runs in this client (its event loop on a thread of
its own), as IPython Parallel's runs in its hub."""

import asyncio
import ipaddress
import threading
import warnings

import ztask_worker

__all__ = ["DaskBridge"]


class _Scheduler:
    """A distributed.Scheduler served by an event loop on its own thread."""

    def __init__(self, host, port, scheduler_args):
        from distributed import Scheduler

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="dask-scheduler", daemon=True)
        self.thread.start()
        args = dict(scheduler_args or {})
        args.setdefault("host", host)
        args.setdefault("port", port)
        args.setdefault("dashboard_address", None)

        async def start():
            return await Scheduler(**args)

        try:
            self.scheduler = self._run(start())
        except BaseException:
            self._stop_loop()
            raise

    @property
    def address(self):
        return self.scheduler.address

    def _run(self, coroutine, timeout=60):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=timeout)

    def _stop_loop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def close(self):
        try:
            self._run(self.scheduler.close(), timeout=30)
        finally:
            self._stop_loop()


def _loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class DaskBridge:
    """Client methods that make the engines a dask.distributed cluster."""

    _dask_scheduler = None

    def become_dask(self, targets="all", port=0, nanny=False, scheduler_args=None, **worker_args):
        """Starts a dask.distributed scheduler here (on `port`; 0: any free
        one; on the address the cluster's scheduler serves clients on, unless
        `scheduler_args` says a `host`; they go to distributed.Scheduler) and
        a worker in
        each target engine's Python worker (a Nanny with `nanny`; the rest of
        the arguments go to distributed.Worker, one thread each unless
        `nthreads` says otherwise), named `distributed_worker` there.
        Returns a distributed.Client of that cluster. Again: the same
        scheduler, more workers."""
        import distributed

        if self._dask_scheduler is None:
            host = (scheduler_args or {}).get("host") or self._dask_host()
            if not _loopback(host):
                warnings.warn("the Dask scheduler listens on %s: Dask's connections are neither signed nor "
                              "encrypted, so whoever reaches that address can run code in the engines" % host,
                              RuntimeWarning, stacklevel=2)
            self._dask_scheduler = _Scheduler(host, port, scheduler_args)
        worker_args.setdefault("nthreads", worker_args.pop("ncores", 1))
        view = self.direct_view(targets)
        futures = view._each(ztask_worker.ns_dask_worker, self._dask_scheduler.address, bool(nanny),
                             worker_args, targets=None)
        view._result(futures, True, None)
        return distributed.Client(self._dask_scheduler.address)

    def _dask_host(self):
        """The address the cluster's scheduler serves clients on: the dask
        scheduler listens there too (on loopback for a cluster of this
        host: dask's connections are neither signed nor encrypted)."""
        endpoint = self._ztask._info.scheduler.get("client", "")
        if not endpoint.startswith("tcp://"):
            return "127.0.0.1"  # a Unix socket: a cluster on loopback
        host = endpoint.split("://", 1)[-1].rsplit(":", 1)[0]
        return host if host and host != "*" else "127.0.0.1"

    def stop_dask(self, targets="all"):
        """Stops the workers become_dask started on the target engines, then
        its scheduler."""
        view = self.direct_view(targets)
        view._result(view._each(ztask_worker.ns_stop_dask_worker, targets=None), True, None)
        scheduler, self._dask_scheduler = self._dask_scheduler, None
        if scheduler is not None:
            scheduler.close()

    # IPython Parallel's older names.
    become_distributed = become_dask
    stop_distributed = stop_dask
