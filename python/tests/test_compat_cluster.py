"""ztask.compat's Cluster (taskcluster from Python) and the %px magics,
against real clusters, as IPython Parallel's documentation uses them."""

import asyncio
import os
import sys

import cloudpickle
import pytest

import ztask.compat as ipp
from conftest import BIN_DIR, wait_until

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(autouse=True)
def bin_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("ZTASK_BIN_DIR", BIN_DIR)
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))


def test_a_cluster_as_a_context_manager_hands_out_a_client(tmp_path):
    with ipp.Cluster(n=2, profile_dir=str(tmp_path / "profile")) as rc:
        assert rc.ids == [0, 1]
        rc[:]["a"] = 5
        assert rc[:]["a"] == [5, 5]
        cluster = rc.cluster
        assert os.path.exists(os.path.join(cluster.profile_dir_of_cluster(), "ztask-cluster.json"))
        supervisor = cluster.controller.process
    assert cluster.controller is None
    wait_until(lambda: not supervisor.is_running() or supervisor.status() == "zombie", 30, "the cluster to stop")


def test_cluster_ids_are_unique_unless_given(tmp_path):
    ids = {ipp.Cluster(profile_dir=str(tmp_path)).cluster_id for _ in range(3)}
    assert len(ids) == 3
    assert ipp.Cluster(cluster_id="abc").cluster_id == "abc"


def test_engines_are_added_stopped_and_restarted(tmp_path):
    cluster = ipp.Cluster(n=1, profile_dir=str(tmp_path / "profile"))

    async def scenario():
        await cluster.start_cluster()
        rc = await cluster.connect_client()
        added = await cluster.start_engines(2)
        rc.wait_for_engines(3, timeout=30)
        before = rc[:].apply_sync(os.getpid)
        await cluster.restart_engines()

        def renewed():
            try:  # an engine may be between its end and its restart
                return len(rc.ids) == 3 and set(rc[:].apply_sync(os.getpid)).isdisjoint(before)
            except (ipp.RemoteError, IndexError):
                return False

        wait_until(renewed, 60, "the engines to come back as new processes")
        await cluster.stop_engines(added)
        wait_until(lambda: len(rc.ids) == 1, 60, "the added engines to leave")
        rc.close()
        await cluster.stop_cluster()

    try:
        asyncio.run(scenario())
    finally:
        cluster.stop_cluster_sync()


def test_a_signal_interrupts_a_running_task(tmp_path):
    import time

    with ipp.Cluster(n=1, profile_dir=str(tmp_path / "profile")) as rc:
        rc[0].apply_sync(os.getpid)  # the engine's Python worker runs
        ar = rc[0].apply_async(time.sleep, 30)
        wait_until(lambda: rc.queue_status()[0]["tasks"] == 1, 30, "the task to start")
        rc.cluster.signal_engines_sync("SIGINT")
        with pytest.raises(ipp.RemoteError) as caught:
            ar.get(30)
        assert caught.value.ename == "KeyboardInterrupt"


def test_from_file_finds_a_running_cluster(tmp_path):
    profile = str(tmp_path / "profile")
    cluster = ipp.Cluster(n=1, profile_dir=profile, cluster_id="")
    with cluster:
        again = ipp.Cluster.from_file(profile_dir=profile)
        assert again.cluster_id == "" and again.controller.pid == cluster.controller.pid
        with again.connect_client_sync() as rc:
            assert len(rc) == 1


def test_px_magics_run_code_on_the_engines(cluster, capsys):
    pytest.importorskip("IPython")
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    rc = ipp.Client(profile_dir=cluster.profile)
    try:
        rc.clear(block=True)
        view = rc.activate(targets=rc.ids, suffix="_t")
        ip.run_line_magic("px_t", "a = 6 * 7")
        assert view["a"] == [42, 42]
        capsys.readouterr()
        ip.run_cell_magic("px_t", "--block", "print(a)\na + 1")
        out = capsys.readouterr().out
        assert "[stdout:%d]" % rc.ids[0] in out and "Out[%d:" % rc.ids[0] in out and ": 43" in out
        ip.run_line_magic("pxconfig_t", "--targets 0")
        assert view.targets == 0
        with pytest.raises(ipp.RemoteError):
            ip.run_cell_magic("px_t", "--block", "1 / 0")
    finally:
        rc.close()
