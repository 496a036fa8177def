"""The clusters started from this machine's IPython profiles."""

import os

from .cluster import Cluster

__all__ = ["ClusterManager"]


class ClusterManager:
    """The clusters started from this machine's IPython profiles."""

    def __init__(self, log=None, **kwargs):
        self.log = log
        self.clusters = {}

    @staticmethod
    def _cluster_key(cluster):
        return "%s:%s" % (os.path.basename(cluster.profile_dir.rstrip("/")), cluster.cluster_id)

    def new_cluster(self, **kwargs):
        cluster = Cluster(**kwargs)
        key = self._cluster_key(cluster)
        if key in self.clusters:
            raise KeyError("a cluster %s exists already" % key)
        self.clusters[key] = cluster
        return key, cluster

    def get_cluster(self, key):
        return self.clusters[key]

    def remove_cluster(self, key):
        del self.clusters[key]

    def load_clusters(self, profile_dirs=None):
        from ..client.client import _ipython_dir

        ipython_dir = _ipython_dir()
        profile_dirs = profile_dirs or [os.path.join(ipython_dir, d) for d in
                                        (os.listdir(ipython_dir) if os.path.isdir(ipython_dir) else [])
                                        if d.startswith("profile_")]
        found = {}
        for profile_dir in profile_dirs:
            security = os.path.join(profile_dir, "security")
            for name in os.listdir(security) if os.path.isdir(security) else []:
                if name.startswith("cluster-") and name.endswith(".json"):
                    try:
                        cluster = Cluster.from_file(os.path.join(security, name))
                    except (OSError, ValueError, KeyError):
                        continue
                    if cluster.controller is not None and cluster.controller.process.is_running():
                        found[self._cluster_key(cluster)] = cluster
        self.clusters = found
        return found
