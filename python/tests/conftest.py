"""Real clusters for the Python suite: taskcluster from the build tree
(ZTASK_BIN_DIR, set by CTest), each in a temporary profile directory, on
ports chosen by the system."""

import os
import shutil
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import ztask  # noqa: E402

BIN_DIR = os.environ.get("ZTASK_BIN_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "bin"
)


def program(name):
    path = os.path.join(BIN_DIR, name)
    if not os.path.exists(path):
        pytest.exit("no %s in %s: build first, or set ZTASK_BIN_DIR" % (name, BIN_DIR), 2)
    return path


class Cluster:
    """A running cluster: its profile directory and its supervisor's pid."""

    def __init__(self, profile, engines, extra, env=None):
        self.profile = str(profile)
        command = [program("taskcluster"), "start", "-n", str(engines), "--daemonize", "--profile-dir",
                   self.profile, *extra]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=60,
                       env=None if env is None else {**os.environ, **env})
        with open(os.path.join(self.profile, "cluster.pid")) as f:
            self.pid = int(f.read())

    def children(self, name):
        """Pids of the supervisor's children called `name`."""
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % entry) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open("/proc/%s/comm" % entry) as f:
                    comm = f.read().strip()
            except OSError:
                continue
            if int(fields[1]) == self.pid and comm == name:
                out.append(int(entry))
        return out

    def server(self, part):
        """Pids of the process serving `part` ("hub", "scheduler"): the
        controller (taskcluster's default layout), or taskhub/taskscheduler."""
        return self.children("taskcontroller") or self.children("task" + part)

    def taskctl(self, *args):
        return subprocess.run([program("taskctl"), "--profile-dir", self.profile, *args], capture_output=True,
                              text=True, timeout=60)

    def stop(self):
        subprocess.run([program("taskcluster"), "stop", "--profile-dir", self.profile], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)


def wait_until(condition, timeout=30.0, what="the condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("%s did not hold within %g s" % (what, timeout))
        time.sleep(0.02)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("profile"), 2, ["--hwm", "4"])
    yield c
    c.stop()


@pytest.fixture
def client(cluster):
    c = ztask.Client(cluster.profile)
    c.wait_for_engines(2, 30)
    yield c
    c.close()


@pytest.fixture
def own_cluster(tmp_path):
    """A cluster of this test alone (for tests that kill its processes)."""
    made = []

    def make(engines=2, *extra, env=None):
        c = Cluster(tmp_path / ("profile%d" % len(made)), engines, list(extra), env)
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()
    shutil.rmtree(tmp_path, ignore_errors=True)
