"""ipp.Cluster over taskcluster: starts and stops ztask clusters from
Python, sync or async, and as a context manager that hands out a Client.

A cluster lives in a profile directory of its own (taskcluster's rule: one
cluster per profile directory): `<profile_dir>/ztask-<cluster_id>`, or the
profile directory itself for cluster_id "". Engines are added and
removed with `taskcluster scale`; a cluster always has at least one (the
first starts with the hub and the scheduler). Its description is written
to `<profile_dir>/security/cluster-<cluster_id>.json` (from_file,
ClusterManager).
"""

import asyncio
import atexit
import json
import os
import secrets
import signal as _signal
import sys
import time
import weakref

from ..client.client import Client
from ..client.processes import _children_of
from . import launcher
from .control import Process, _engine_pids, _taskcluster, _terminate, cluster_profile_dir
from .launcher import find_launcher_class

__all__ = ["Cluster"]


# Clusters started here with shutdown_atexit stop when Python exits.
_at_exit = weakref.WeakSet()


@atexit.register
def _stop_at_exit():
    for cluster in list(_at_exit):
        if cluster.controller is not None:
            try:
                cluster.stop_cluster_sync()
            except Exception:
                _terminate(cluster.controller.process)


class _Controller(launcher.LocalControllerLauncher):
    """The running cluster's supervisor (hub and scheduler are its children)."""

    def __init__(self, pid, config=None):
        self.process = Process(pid)
        self.pid = pid
        self.config = config


class _EngineSet(launcher.LocalEngineSetLauncher):
    def __init__(self, cluster, n):
        self.cluster = cluster
        self.n = n

    def get_output(self):
        logs = os.path.join(self.cluster._profile, "logs")
        out = []
        for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
            if name.startswith("engine"):
                with open(os.path.join(logs, name), errors="replace") as f:
                    out.append(f.read())
        return "".join(out)


class Cluster:
    """A ztask cluster on this machine, started from Python."""

    def __init__(self, n=None, profile=None, profile_dir=None, cluster_id=None, log=None, config=None,
                 shutdown_atexit=True, engine_timeout=None, engines="local", controller="local", **options):
        from ..client.client import _ipython_dir

        self.n = n if n is not None else (os.cpu_count() or 1)
        self.profile = profile or "default"
        self.profile_dir = profile_dir or os.path.join(_ipython_dir(), "profile_" + self.profile)
        self.cluster_id = cluster_id if cluster_id is not None else "%d-%s" % (time.time(), secrets.token_hex(2))
        self.config = config
        self.log = log
        self.shutdown_atexit = shutdown_atexit
        self.engine_timeout = engine_timeout
        self.options = options
        self.controller_args = list(options.pop("controller_args", None) or [])
        self.load_profile = options.pop("load_profile", True)
        self._configure(n, config, engine_timeout)
        if log is None:
            import logging

            log = logging.getLogger("%s.%s" % (__name__, self.cluster_id))
            if not log.handlers:
                log.addHandler(logging.StreamHandler(sys.stdout))
        self.log = log
        self.engine_launcher_class = find_launcher_class(engines, "engine")
        self.controller_launcher_class = find_launcher_class(controller, "controller")
        self.controller = None
        self.engines = {}
        self._clients = []

    def _configure(self, n, config, engine_timeout):
        """Settings from the profile's ipcluster_config.json, then config
        (a traitlets Config), then keyword arguments, each over the last."""
        path = os.path.join(self.profile_dir, "ipcluster_config.json")
        settings = {}
        if self.load_profile and os.path.exists(path):
            with open(path) as f:
                settings.update(json.load(f).get("Cluster", {}))
        if config is not None and "Cluster" in config:
            settings.update(dict(config.Cluster))
        if n is not None:
            settings["n"] = n
        if engine_timeout is not None:
            settings.setdefault("engine_timeout", engine_timeout)
        self.n = settings.get("n", self.n)
        self.engine_timeout = settings.get("engine_timeout", 60)
        if "controller_args" in settings and not self.controller_args:
            self.controller_args = list(settings["controller_args"])

    @property
    def _profile(self):
        return cluster_profile_dir(self.profile_dir, self.cluster_id)

    @property
    def cluster_file(self):
        return os.path.join(self.profile_dir, "security", "cluster-%s.json" % self.cluster_id)

    @property
    def engine_set(self):
        return next(iter(self.engines.values()), None)

    def profile_dir_of_cluster(self):
        return self._profile

    def __repr__(self):
        fields = ["cluster_id=%r" % self.cluster_id, "profile_dir=%r" % self.profile_dir]
        if self.controller is not None:
            fields.append("controller=<running>")
        if self.engines:
            fields.append("engine_sets=%r" % list(self.engines))
        return "<Cluster(%s)>" % ", ".join(fields)

    # ---- starting and stopping (sync) ----------------------------------------------

    def _launcher(self):
        launcher = getattr(self.engine_launcher_class, "ztask_launcher", "local")
        if launcher is None:
            raise ValueError("taskcluster has no %s launcher (it has local, mpi, ssh and slurm)"
                             % self.engine_launcher_class.__name__)
        return launcher

    def _running_engines(self):
        return sum(s.n for s in self.engines.values())

    def start_controller_sync(self, engines=1):
        """Starts hub, scheduler and `engines` engines (at least one)."""
        if self.controller is not None:
            raise RuntimeError("this cluster's controller is already running")
        os.makedirs(self._profile, mode=0o700, exist_ok=True)
        _taskcluster("start", "-n", str(max(1, engines)), "--daemonize", "--profile-dir", self._profile,
                     "--launch-timeout", str(self.engine_timeout), "--launcher", self._launcher())
        with open(os.path.join(self._profile, "cluster.pid")) as f:
            self.controller = _Controller(int(f.read()), self.config)
        if self.shutdown_atexit:
            _at_exit.add(self)
        self._write_file()

    def start_engines_sync(self, n=None, engine_set_id=None):
        """Adds n engines; returns the id of this set of them."""
        if self.controller is None:
            self.start_controller_sync()
        n = self.n if n is None else n
        engine_set_id = engine_set_id or "%d-%s" % (time.time(), secrets.token_hex(2))
        if self._launcher() == "local":
            _taskcluster("scale", str(max(1, self._running_engines() + n)), "--profile-dir", self._profile)
        else:  # a job of engines cannot grow: another job joins
            _taskcluster("engines", "start", "--launcher", self._launcher(), "-n", str(n), "--profile-dir",
                         self._profile)
        self.engines[engine_set_id] = _EngineSet(self, n)
        self._write_file()
        return engine_set_id

    def start_cluster_sync(self, n=None):
        n = self.n if n is None else n
        self.start_controller_sync(engines=n)
        self.engines["%d-%s" % (time.time(), secrets.token_hex(2))] = _EngineSet(self, n)
        self._write_file()
        return self

    def stop_engines_sync(self, engine_set_id=None):
        """Removes a set of engines (all of them: the pool keeps one)."""
        if engine_set_id is None:
            for key in list(self.engines):
                self.stop_engines_sync(key)
            return
        engine_set = self.engines.pop(engine_set_id)
        if self.controller is not None and self._launcher() == "local":  # a job of engines stays until stop
            _taskcluster("scale", str(max(1, self._running_engines())), "--profile-dir", self._profile)
        del engine_set
        self._write_file()

    def stop_controller_sync(self):
        if self.controller is None:
            return
        for client in self._clients:
            client.close()
        self._clients = []
        supervisor = self.controller.process
        try:
            _taskcluster("stop", "--profile-dir", self._profile)
        except RuntimeError as e:
            if "no cluster is running" not in str(e):
                raise
            # Stopped already (by another handle on it), or its profile
            # directory is gone: then its supervisor is told directly.
            _terminate(supervisor)
        finally:
            self.controller = None
            self.engines = {}
            try:
                os.remove(self.cluster_file)
            except OSError:
                pass

    stop_cluster_sync = stop_controller_sync

    def restart_engines_sync(self, engine_set_id=None):
        """The engines' processes end; their supervisor starts them again."""
        for pid in _engine_pids(self._profile):
            os.kill(pid, _signal.SIGTERM)

    def signal_engines_sync(self, signum, engine_set_id=None):
        """Sends a signal to what the engines run (their Python workers)."""
        if isinstance(signum, str):
            signum = getattr(_signal, signum)
        for engine in _engine_pids(self._profile):
            for worker in _children_of(engine):
                try:
                    os.kill(worker, signum)
                except OSError:
                    pass

    def connect_client_sync(self, **kwargs):
        client = Client(profile_dir=self._profile, **kwargs)
        client.cluster = self
        self._clients.append(client)
        return client

    def start_and_connect_sync(self, n=None, activate=False):
        if self.controller is None:
            self.start_cluster_sync(n)
        client = self.connect_client_sync()
        client.wait_for_engines(self._running_engines() or 1, timeout=self.engine_timeout)
        if activate:
            client.activate()
        return client

    def _write_file(self):
        os.makedirs(os.path.dirname(self.cluster_file), exist_ok=True)
        with open(self.cluster_file, "w") as f:
            json.dump(self.to_dict(), f)

    # ---- async -------------------------------------------------------------------------

    async def _run(self, method, *args, **kwargs):
        return await asyncio.get_running_loop().run_in_executor(None, lambda: method(*args, **kwargs))

    async def start_controller(self):
        return await self._run(self.start_controller_sync)

    async def start_engines(self, n=None, engine_set_id=None):
        return await self._run(self.start_engines_sync, n, engine_set_id)

    async def start_cluster(self, n=None):
        return await self._run(self.start_cluster_sync, n)

    async def stop_engines(self, engine_set_id=None):
        return await self._run(self.stop_engines_sync, engine_set_id)

    async def stop_controller(self):
        return await self._run(self.stop_controller_sync)

    stop_cluster = stop_controller

    async def restart_engines(self, engine_set_id=None):
        return await self._run(self.restart_engines_sync, engine_set_id)

    async def signal_engines(self, signum, engine_set_id=None):
        return await self._run(self.signal_engines_sync, signum, engine_set_id)

    async def connect_client(self, **kwargs):
        return await self._run(self.connect_client_sync, **kwargs)

    async def start_and_connect(self, n=None, activate=False):
        return await self._run(self.start_and_connect_sync, n, activate)

    def __enter__(self):
        self._entered = self.start_and_connect_sync()
        return self._entered

    def __exit__(self, *exc):
        self.stop_cluster_sync()

    async def __aenter__(self):
        return await self.start_and_connect()

    async def __aexit__(self, *exc):
        await self.stop_cluster()

    # ---- description ----------------------------------------------------------------------

    def to_dict(self):
        return {"cluster": {"cluster_id": self.cluster_id, "profile_dir": self.profile_dir, "n": self.n,
                            "controller_pid": self.controller.pid if self.controller else None,
                            "engines": self.engine_launcher_class.__name__},
                "engines": {key: s.n for key, s in self.engines.items()}}

    @classmethod
    def from_dict(cls, d, **kwargs):
        info = d["cluster"]
        kwargs.setdefault("engines", info.get("engines", "local"))
        c = cls(n=info["n"], profile_dir=info["profile_dir"], cluster_id=info["cluster_id"], shutdown_atexit=False,
                **kwargs)
        if info.get("controller_pid"):
            c.controller = _Controller(info["controller_pid"])
        c.engines = {key: _EngineSet(c, n) for key, n in d.get("engines", {}).items()}
        return c

    @classmethod
    def from_file(cls, cluster_file=None, profile=None, profile_dir=None, cluster_id="", **kwargs):
        if cluster_file is None:
            from ..client.client import _ipython_dir

            profile_dir = profile_dir or os.path.join(_ipython_dir(), "profile_" + (profile or "default"))
            cluster_file = os.path.join(profile_dir, "security", "cluster-%s.json" % cluster_id)
        with open(cluster_file) as f:
            return cls.from_dict(json.load(f), **kwargs)
