"""Real clusters with their dashboard for the dashboard's tests: taskcluster
from the build tree (ZTASK_BIN_DIR, set by CTest), each in a temporary
profile directory, every port chosen by the system."""

import json
import os
import subprocess
import time
import urllib.error
import urllib.request

import pytest

BIN_DIR = os.environ.get("ZTASK_BIN_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "bin")


def program(name):
    path = os.path.join(BIN_DIR, name)
    if not os.path.exists(path):
        pytest.exit("no %s in %s: build first, or set ZTASK_BIN_DIR" % (name, BIN_DIR), 2)
    return path


def wait_until(condition, timeout=30.0, what="the condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("%s did not hold within %g s" % (what, timeout))
        time.sleep(0.05)


class Cluster:
    """A running cluster started with --dashboard: its profile, the URL."""

    def __init__(self, profile, engines=2, dashboard="0", extra=()):
        self.profile = str(profile)
        out = subprocess.run(
            [program("taskcluster"), "start", "-n", str(engines), "--daemonize", "--profile-dir",
             self.profile, "--dashboard", dashboard, *extra],
            check=True, capture_output=True, text=True, timeout=90).stdout
        lines = [l for l in out.splitlines() if l.startswith("dashboard: ")]
        assert lines, "taskcluster printed no dashboard URL:\n" + out
        self.url = lines[0].split(" ", 1)[1]
        self.base = self.url.split("?", 1)[0]

    def taskctl(self, *args, check=True):
        r = subprocess.run([program("taskctl"), "--profile-dir", self.profile, *args],
                           capture_output=True, text=True, timeout=120)
        if check and r.returncode != 0:
            raise AssertionError("taskctl %s: %s" % (args[0], r.stderr))
        return r

    def records(self, ids):
        out = self.taskctl("result", *ids, check=False).stdout  # 1 when some failed
        return [json.loads(l) for l in out.splitlines() if l.strip()]

    def token(self):
        return self.url.split("token=", 1)[1]

    def get(self, path, headers=None, token=True):
        """(status, body text) of a GET to the dashboard; with the token in
        an Authorization header when `token` and no `headers` are given."""
        if headers is None and token:
            headers = {"Authorization": "Bearer " + self.token()}
        request = urllib.request.Request(self.base + path.lstrip("/"), headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def json(self, path):
        status, body = self.get(path)
        assert status == 200, "%s: %d %s" % (path, status, body)
        return json.loads(body)

    def stop(self):
        subprocess.run([program("taskcluster"), "stop", "--profile-dir", self.profile],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


@pytest.fixture
def make_cluster(tmp_path):
    made = []

    def make(**kwargs):
        c = Cluster(tmp_path / ("profile%d" % len(made)), **kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()


def graph_file(path, maps=200, reduces=20, fail_every=40):
    """A map-reduce graph: maps (every fail_every-th one, from the 7th,
    fails), reduces of 10 maps each, one final task after every reduce.
    Returns (file, expected ok, expected failed)."""
    tasks = []
    failing = set(range(7, maps, fail_every))
    for i in range(maps):
        tasks.append({"name": "map%d" % i, "label": "map/%d" % i,
                      "command": ["false" if i in failing else "true"]})
    per = maps // reduces
    for j in range(reduces):
        tasks.append({"name": "reduce%d" % j, "label": "reduce/%d" % j, "command": ["true"],
                      "after": ["map%d" % i for i in range(j * per, (j + 1) * per)]})
    tasks.append({"name": "final", "label": "final", "command": ["true"],
                  "after": ["reduce%d" % j for j in range(reduces)]})
    path.write_text(json.dumps({"tasks": tasks}))
    bad_reduces = {i // per for i in failing}
    failed = len(failing) + len(bad_reduces) + (1 if bad_reduces else 0)
    return path, len(tasks) - failed, failed
