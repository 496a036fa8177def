"""ipyparallel.client's names: the Client, views and results."""

from .asyncresult import AsyncHubResult, AsyncMapResult, AsyncResult
from .client import Client
from .execute import ExecuteReply
from .remotefunction import ParallelFunction, RemoteFunction, parallel, remote
from .view import BroadcastView, DirectView, LoadBalancedView, View

__all__ = ["Client", "View", "DirectView", "LoadBalancedView", "BroadcastView", "AsyncResult", "AsyncMapResult",
           "AsyncHubResult", "ExecuteReply", "RemoteFunction", "ParallelFunction", "remote", "parallel"]
