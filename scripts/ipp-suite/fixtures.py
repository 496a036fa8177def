"""The cluster fixtures of IPython Parallel's test suite, for a ztask
cluster: this file stands in for the suite's own ipyparallel/tests/
__init__.py (which starts ipcontroller and ipengine); every other file of
the suite runs unchanged. scripts/ipp-suite.sh puts it in place.

setup() starts `taskcluster` in the profile the suite's clients find
(profile 'iptest' in IPython's directory); add_engines() grows it with
`taskcluster scale`; teardown() stops it.
"""

import os
import subprocess
import time

from IPython.paths import get_ipython_dir

from ipyparallel import Client, error

BIN_DIR = os.environ.get("ZTASK_BIN_DIR", "")
launchers = []


class _Engines:
    """What the suite keeps of the engines it added: poll() is None while
    the cluster runs."""

    def __init__(self, profile_dir):
        self.profile_dir = profile_dir

    def poll(self):
        return None if os.path.exists(os.path.join(self.profile_dir, "cluster.pid")) else 0


def _program(name):
    return os.path.join(BIN_DIR, name) if BIN_DIR else name


def profile_dir(profile="iptest"):
    return os.path.join(get_ipython_dir(), "profile_" + profile)


def _taskcluster(*args, profile="iptest"):
    subprocess.run([_program("taskcluster"), *args, "--profile-dir", profile_dir(profile)], check=True,
                   stdout=subprocess.DEVNULL, timeout=120)


def setup():
    where = profile_dir()
    os.makedirs(where, mode=0o700, exist_ok=True)
    _taskcluster("start", "-n", "1", "--daemonize", "--db", ":memory:")
    add_engines(0)


def add_engines(n=1, profile="iptest", total=False):
    """Adds n engines (with total: up to n in all); returns a handle per
    engine added."""
    rc = Client(profile=profile)
    base = len(rc)
    if total:
        n = max(n - base, 0)
    # One at a time, so that engine ids follow the order taskcluster started
    # them in (it retires the newest first when the suite shuts one down).
    for size in range(base + 1, base + n + 1):
        _taskcluster("scale", str(size), profile=profile)
        deadline = time.monotonic() + 30
        while len(rc) < size:
            if time.monotonic() > deadline:
                raise RuntimeError("Timeout waiting for engines to connect.")
            time.sleep(0.05)
    rc.close()
    engines = [_Engines(profile_dir(profile)) for _ in range(n)]
    launchers.extend(engines)
    return engines


def teardown():
    launchers.clear()
    try:
        _taskcluster("stop")
    except subprocess.CalledProcessError:
        pass


__all__ = ["setup", "teardown", "add_engines", "launchers", "error"]
