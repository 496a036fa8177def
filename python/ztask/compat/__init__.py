"""IPython Parallel's API over ztask: `import ztask.compat as ipp`.

An IPython Parallel program runs by changing its import (or, unchanged,
with a stand-in `ipyparallel` package: see install_as). Client (engines by
id or index, views, history, results, the hub's records), DirectView with
the engines' namespaces (push, pull, execute, scatter, gather,
view[name], sync_imports, clear), LoadBalancedView (apply, map, imap,
flags, executor), BroadcastView, AsyncResult with its metadata, Reference,
interactive, Dependency, require, depend, remote, parallel, Cluster (ztask
clusters started from Python), the %px magics, and ipp.error in IPython
Parallel's hierarchy. docs/python.md says what differs.
"""

from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, FIRST_EXCEPTION

from . import error
from ._alias import install_as
from .client import (
    AsyncHubResult,
    AsyncMapResult,
    AsyncResult,
    BroadcastView,
    Client,
    DirectView,
    ExecuteReply,
    LoadBalancedView,
    ParallelFunction,
    RemoteFunction,
    View,
    parallel,
    remote,
)
from .dependency import Dependency, depend, require
from .error import CompositeError, RemoteError, TimeoutError
from .serialize import Reference
from .util import interactive

version_info = (9, 1, 0)
__version__ = "9.1.0"

__all__ = ["Client", "View", "DirectView", "LoadBalancedView", "BroadcastView", "AsyncResult", "AsyncMapResult",
           "AsyncHubResult", "ExecuteReply", "RemoteFunction", "ParallelFunction", "remote", "parallel",
           "Dependency", "depend", "require", "Reference", "interactive", "error", "RemoteError",
           "CompositeError", "TimeoutError", "Cluster", "ClusterManager", "register_joblib_backend",
           "bind_kernel", "install_as", "ALL_COMPLETED", "FIRST_COMPLETED", "FIRST_EXCEPTION"]


def __getattr__(name):
    # Started on first use: they import more (asyncio, IPython).
    if name in ("Cluster", "ClusterManager"):
        from . import cluster

        return getattr(cluster, name)
    from . import _alias

    own = _alias.own_submodule(name) if not name.startswith("__") else None
    if own is not None:
        return own
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def register_joblib_backend(name="ipyparallel", make_default=False):
    """Registers a joblib backend that runs on a load-balanced view of a
    default Client."""
    from .client._joblib import register

    register(name, make_default)


def bind_kernel(**kwargs):
    raise NotImplementedError("ztask engines are not IPython kernels: there is no kernel to bind")


def _load_jupyter_server_extension(app):
    pass


def load_ipython_extension(ip):
    """`%load_ext ztask.compat`: registers the %px magics on all engines."""
    from .magics import ParallelMagics

    ip.register_magics(ParallelMagics(ip, None, ""))
