"""joblib's parallel backend over a ztask.compat view:
`view.register_joblib_backend()` or `ipp.register_joblib_backend()`, then
`joblib.Parallel(backend="ipyparallel")`."""

from joblib.parallel import AutoBatchingMixin, ParallelBackendBase, register_parallel_backend

__all__ = ["IPythonParallelBackend", "register"]


class IPythonParallelBackend(AutoBatchingMixin, ParallelBackendBase):
    """Runs joblib's batches as tasks of a load-balanced view; without one,
    on the default cluster (started here, and stopped with the backend,
    when none runs)."""

    def __init__(self, view=None, **kwargs):
        super().__init__(**kwargs)
        self._owned_client = None
        self._owned_cluster = None
        if view is None:
            view = self._default_view()
        self._view = view

    def _default_view(self):
        from ztask.errors import ClusterError

        from ..cluster import Cluster
        from .client import Client

        try:
            client = Client()
        except ClusterError:
            self._owned_cluster = Cluster()
            self._owned_cluster.start_cluster_sync()
            client = self._owned_cluster.connect_client_sync()
        self._owned_client = client
        client.wait_for_engines(1, timeout=60)
        # joblib sends closures: they keep the globals they were made with.
        client._mode = "cloudpickle"
        return client.load_balanced_view()

    def effective_n_jobs(self, n_jobs):
        return max(1, len(self._view))

    def apply_async(self, func, callback=None):
        ar = self._view.apply_async(func)
        if callback is not None:
            ar.add_done_callback(lambda done: callback(done.result()))
        return ar

    def terminate(self):
        if self._owned_client is not None:
            self._owned_client.close()
        if self._owned_cluster is not None:
            self._owned_cluster.stop_cluster_sync()


def register(name="ipyparallel", make_default=False, view=None):
    """Registers the backend under `name` (on `view`, else the default
    cluster's load-balanced view)."""
    register_parallel_backend(name, lambda **kwargs: IPythonParallelBackend(view=view, **kwargs),
                              make_default=make_default)
