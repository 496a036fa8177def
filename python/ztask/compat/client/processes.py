"""The Client's hold on the engines' processes: signals to what they run,
and engines leaving the cluster (this host's /proc; taskcluster)."""

import os
import signal as _signal
import time

from ztask import protocol

__all__ = ["EngineProcesses"]


class EngineProcesses:
    """Client methods that reach the engines' processes."""

    def send_signal(self, sig, targets=None, block=None):
        """Sends a signal (a number or a name such as "SIGINT") to what the
        engines run: their Python workers, on this host. SIGINT interrupts
        a running task (KeyboardInterrupt)."""
        if isinstance(sig, str):
            sig = getattr(_signal, sig)
        targets = self._build_targets(targets)[1]
        for engine in self._ztask.engines():
            if engine["id"] in targets and engine.get("pid"):
                for pid in _children_of(engine["pid"]):
                    try:
                        os.kill(pid, sig)
                    except OSError:
                        pass

    def shutdown(self, targets="all", restart=False, hub=False, block=None):
        """With hub=True, stops the whole cluster. Engines alone: those
        given leave the cluster (`restart`: their supervisor starts them
        again)."""
        if hub:
            self._ztask._ask_hub(protocol.SHUTDOWN_REQUEST, {})
            return
        from ..cluster import stop_engines

        ids = self._build_targets(targets)[1]
        stop_engines(self, ids, restart)
        if block and not restart:
            deadline = time.monotonic() + 30
            while set(ids) & set(self.ids) and time.monotonic() < deadline:
                time.sleep(0.05)


def _children_of(pid):
    """Pids of the processes whose parent is `pid` (this host's /proc)."""
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out


