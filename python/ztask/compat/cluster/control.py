"""How ztask.compat drives taskcluster and the engines' processes: the
programs, stopping engines of a client's cluster, their pids."""

import os
import re
import shutil
import signal as _signal
import subprocess
import time

__all__ = ["program", "cluster_profile_dir", "stop_engines", "Process"]


def program(name):
    """A ztask program: in $ZTASK_BIN_DIR, on PATH, or in the build tree of
    the clone this package is in."""
    if os.environ.get("ZTASK_BIN_DIR"):
        return os.path.join(os.environ["ZTASK_BIN_DIR"], name)
    found = shutil.which(name)
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "..", "..", "..", "build", "bin", name)


def cluster_profile_dir(profile_dir, cluster_id):
    return os.path.join(profile_dir, "ztask-" + cluster_id) if cluster_id else profile_dir


def _taskcluster(*args, timeout=120):
    done = subprocess.run([program("taskcluster"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError("taskcluster %s failed: %s" % (args[0], done.stderr.strip() or done.stdout.strip()))
    return done.stdout


def _engine_pids(profile):
    """Pids of a cluster's running engines on this host, as they
    registered with the hub (whatever launcher started them)."""
    import socket

    import ztask

    with ztask.Client(profile) as client:
        engines = client.engines()
    here = socket.gethostname()
    return [e["pid"] for e in engines if e.get("state") == "running" and e.get("pid") and e.get("host") in (here, "")]


def stop_engines(client, ids, restart):
    """Engines leave a client's cluster: the newest ones, by shrinking its
    pool (`restart`: their processes are killed; the supervisor starts them
    again)."""
    profile = os.path.dirname(client._ztask._info.path)
    if restart:
        pids = {e["id"]: e.get("pid") for e in client._ztask.engines()}
        for engine_id in ids:
            if pids.get(engine_id):
                os.kill(pids[engine_id], _signal.SIGTERM)
        return
    running = _newest_last(client._ztask.engines())
    newest = running[len(running) - len(ids):]
    if sorted(ids) != sorted(newest):
        raise ValueError("a supervised pool sheds its newest engines first (taskcluster scale): it can stop "
                         "engines %s, not %s" % (sorted(newest), sorted(ids)))
    if len(ids) >= len(running):
        _taskcluster("stop", "--profile-dir", profile)
    else:
        _taskcluster("scale", str(len(running) - len(ids)), "--profile-dir", profile)


class Process:
    """A process of this host by pid, with what programs ask of a
    cluster's controller process (psutil's names, without psutil)."""

    def __init__(self, pid):
        self.pid = pid

    def status(self):
        """"running", "zombie", ... or "gone" (from /proc)."""
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return "gone"
        return {"Z": "zombie", "X": "dead", "T": "stopped", "S": "sleeping", "D": "disk-sleep"}.get(state,
                                                                                              "running")

    def is_running(self):
        return self.status() not in ("gone", "dead")

    def terminate(self):
        try:
            os.kill(self.pid, _signal.SIGTERM)
        except ProcessLookupError:
            pass

    def wait(self, timeout=None):
        """Until it has exited (TimeoutError after `timeout` seconds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.is_running() and self.status() != "zombie":
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError("process %d still runs after %g s" % (self.pid, timeout))
            time.sleep(0.02)


def _terminate(process):
    """SIGTERM to a cluster's supervisor, which stops what it runs."""
    try:
        if process.is_running() and process.status() != "zombie":
            process.terminate()
            process.wait(30)
    except Exception:  # gone meanwhile
        pass


def _newest_last(engines):
    """Running engine ids in the order their supervisor started them (their
    names, engine-0, engine-1...; ids follow registration, which engines
    started together may reach in any order)."""
    def started(e):
        digits = re.search(r"(\d+)$", e.get("name") or "")
        return (int(digits.group(1)) if digits else e["id"], e["id"])

    return [e["id"] for e in sorted((e for e in engines if e.get("state") == "running"), key=started)]
