"""ipp.Cluster over taskcluster (cluster.py), ClusterManager
(manager.py), and the launcher names programs pick (launcher.py)."""

from . import launcher
from .cluster import Cluster
from .control import cluster_profile_dir, program, stop_engines
from .manager import ClusterManager

__all__ = ["Cluster", "ClusterManager", "cluster_profile_dir", "stop_engines", "program", "launcher"]
