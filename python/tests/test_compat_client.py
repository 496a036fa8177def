"""ztask.compat's Client and AsyncResult against a real cluster, as IPython
Parallel's documentation uses them: history, outstanding, wait for
everything, get_result from another client, resubmit, queue_status, the
hub's records through db_query and hub_history, purges; AsyncResult's
metadata as attributes and items, its times, iteration, split, and
return_exceptions; ordered=False maps, imap, the executor."""

import concurrent.futures
import datetime
import os
import sys
import time

import cloudpickle
import pytest

import ztask.compat as ipp

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture
def rc(cluster):
    c = ipp.Client(profile_dir=cluster.profile)
    c.wait_for_engines(2, timeout=30)
    yield c
    c.close()


def test_history_outstanding_and_wait_for_everything(rc):
    view = rc.load_balanced_view()
    ars = [view.apply_async(time.sleep, 0.2) for _ in range(3)]
    assert set(rc.history[-3:]) == {a.msg_ids[0] for a in ars}
    assert rc.outstanding >= {a.msg_ids[0] for a in ars}
    assert rc.wait(timeout=30)
    assert not rc.outstanding
    assert view.history == [a.msg_ids[0] for a in ars]


def test_wait_for_engines_blocks_or_gives_a_future(rc):
    assert rc.wait_for_engines(2) is None
    future = rc.wait_for_engines(2, block=False)
    assert isinstance(future, concurrent.futures.Future) and future.done()
    with pytest.raises(TimeoutError):
        rc.wait_for_engines(3, timeout=0.1)


def test_metadata_as_attributes_and_items(rc):
    ar = rc[:].apply_async(time.sleep, 0.3)
    assert ar.completed == [None, None]
    with pytest.raises(AttributeError):
        ar.foo
    with pytest.raises(KeyError):
        ar["foo"]
    ar.get(30)
    assert ar.engine_id == rc.ids == ar["engine_id"]
    assert all(isinstance(t, datetime.datetime) for t in ar.completed)
    assert 0.25 < ar.wall_time < 5 and 0.5 < ar.serial_time < 10
    single = rc[-1].apply_async(time.sleep, 0.1)
    single.get(30)
    assert isinstance(single.completed, datetime.datetime) and single.engine_id == rc.ids[-1]
    assert single.started >= single.submitted


def test_iteration_split_and_return_exceptions(rc):
    view = rc.load_balanced_view()

    def fail_on_2(n):
        if n == 2:
            raise ValueError("two")
        return n

    amr = view.map_async(fail_on_2, range(4), return_exceptions=True)
    out = list(amr)
    assert out[:2] == [0, 1] and out[3] == 3 and isinstance(out[2], ipp.RemoteError)
    assert amr.get() == out
    with pytest.raises(ipp.CompositeError) as caught:
        rc[:].apply_sync(lambda: 1 / 0)
    assert [info["engine_id"] for *_, info in caught.value.elist] == rc.ids
    ar = rc[:].apply_async(lambda: 7)
    assert [part.get(30) for part in ar.split()] == ar.get(30) == [7, 7]
    assert ipp.AsyncResult.join(*ar.split()).get(30) == [7, 7]


def test_get_dict_needs_distinct_engines(rc):
    ar = rc[:].apply_async(lambda: 5)
    assert ar.get_dict(30) == {i: 5 for i in rc.ids}
    amr = rc.load_balanced_view().map_async(abs, range(6))
    with pytest.raises(ValueError):
        amr.get_dict()


def test_get_result_from_another_client_and_resubmit(rc, cluster):
    ar = rc.load_balanced_view().apply_async(pow, 3, 4)
    assert ar.get(30) == 81
    other = ipp.Client(profile_dir=cluster.profile)
    try:
        hub_result = other.get_result(ar.msg_ids[0], owner=False)
        assert isinstance(hub_result, ipp.AsyncHubResult)
        assert hub_result.get(30) == 81
        with pytest.raises(ipp.RemoteError):  # the hub keeps no Python task's request
            other.resubmit(ar.msg_ids)
    finally:
        other.close()
    again = rc.resubmit(ar.msg_ids)
    assert again.get(30) == 81 and again.msg_ids != ar.msg_ids
    with pytest.raises(ipp.RemoteError) as caught:
        rc.resubmit(["nonsense"])
    assert caught.value.ename == "KeyError"


def test_db_query_and_hub_history(rc):
    ars = [rc[-1].apply_async(lambda: 1) for _ in range(3)]
    rc.wait(ars, timeout=30)
    ids = [a.msg_ids[0] for a in ars]
    deadline = time.monotonic() + 10
    while not set(ids) <= set(rc.hub_history()) and time.monotonic() < deadline:
        time.sleep(0.05)
    history = rc.hub_history()
    assert history[-3:] == ids
    # The hub hears where a short task ran with its outcome, which reaches
    # it a moment after the reply reached the client.
    while time.monotonic() < deadline:
        found = rc.db_query({"msg_id": {"$in": ids}}, keys=["submitted", "engine_id"])
        if len(found) == 3 and all(r.get("engine_id") is not None for r in found):
            break
        time.sleep(0.05)
    assert sorted(r["msg_id"] for r in found) == sorted(ids)
    assert all(set(r) == {"msg_id", "submitted", "engine_id"} and r["engine_id"] == rc.ids[-1] for r in found)
    middle = rc.db_query({"msg_id": ids[1]})[0]["submitted"]
    before = rc.db_query({"submitted": {"$lt": middle}, "msg_id": {"$in": ids}})
    assert [r["msg_id"] for r in before] == ids[:1]
    rc.purge_hub_results(ids[0])
    assert ids[0] not in rc.hub_history()


def test_queue_status_in_ipython_parallel_shape(rc):
    qs = rc.queue_status()
    assert set(qs) == set(rc.ids) | {"unassigned"}
    assert set(qs[rc.ids[0]]) == {"queue", "completed", "tasks"}
    assert set(rc.queue_status(targets=rc.ids[0])) == {"queue", "completed", "tasks"}


def test_purge_local_results_refuses_outstanding_tasks(rc):
    ar = rc[-1].apply_async(time.sleep, 0.5)
    with pytest.raises(RuntimeError):
        rc.purge_local_results("all")
    ar.get(30)
    rc.purge_local_results("all")
    assert len(rc.results) == 0 and len(rc.metadata) == 0


def test_unordered_map_yields_results_as_they_come(rc):
    view = rc.load_balanced_view()

    def slow(x):
        time.sleep(0.05 * x)
        return x

    data = [8, 1, 6, 2]
    came = list(view.map_async(slow, data, ordered=False))
    assert sorted(came) == sorted(data) and came != data
    assert list(view.map_async(slow, data)) == data


def test_imap_submits_lazily_and_can_be_cancelled(rc):
    import itertools

    view = rc.load_balanced_view()
    gen = view.imap(lambda i: i, itertools.count(), max_outstanding=3)
    assert [next(gen) for _ in range(4)] == [0, 1, 2, 3]
    gen.cancel()
    rc.wait(timeout=30)
    assert 4 <= len(view.history) <= 7


def test_executor_is_a_concurrent_futures_executor(rc):
    view = rc.load_balanced_view()
    with view.executor as executor:
        f = executor.submit(pow, 2, 5)
        assert isinstance(f, concurrent.futures.Future)
        results = executor.map(abs, [-1, -2, -3])
    assert f.result() == 32 and list(results) == [1, 2, 3]
    assert rc.executor().submit(pow, 2, 2).result() == 4


def test_invalid_dependency_fails_at_get(rc):
    view = rc.load_balanced_view()
    with view.temp_flags(after="12345"):
        ar = view.apply_async(lambda: 1)
    with pytest.raises(ipp.error.InvalidDependency) as caught:
        ar.get(30)
    assert caught.value.ename == "InvalidDependency"


def test_dependency_checks_as_ipython_parallel_does():
    done, failed = {"a", "b"}, {"c"}
    dep = ipp.Dependency(["a", "c"], all=True, success=True, failure=False)
    assert not dep.check(done, failed) and dep.unreachable(done, failed)
    dep.all = False
    assert dep.check(done, failed) and not dep.unreachable(done, failed)
    assert ipp.Dependency(["c"], success=False, failure=True).check(done, failed)


def test_joblib_runs_its_calls_on_a_view(rc):
    joblib = pytest.importorskip("joblib")
    view = rc.load_balanced_view()
    view.register_joblib_backend("ztask-test")
    result = joblib.Parallel(backend="ztask-test")(joblib.delayed(abs)(-i) for i in range(10))
    assert result == list(range(10))
    assert len(view.history) >= 1


def test_views_know_their_engines(rc):
    def echo_kwargs(**kwargs):
        return kwargs

    assert rc[-1].apply_async(echo_kwargs, f=5, block=1).get(30) == {"f": 5, "block": 1}
    assert rc.direct_view().targets == "all" and len(rc.direct_view()) == len(rc.ids)
    assert len(rc.load_balanced_view()) == len(rc.ids) and len(rc[-1]) == 1
    assert [v.targets for v in rc] == rc.ids


def test_send_signal_interrupts_what_the_engines_run(rc):
    v = rc[-1]
    v.apply_sync(os.getpid)  # its Python worker runs
    ar = v.apply_async(time.sleep, 30)
    deadline = time.monotonic() + 30
    while rc.queue_status(targets=rc.ids[-1])["tasks"] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    rc.send_signal("SIGINT", targets=rc.ids[-1])
    with pytest.raises(ipp.RemoteError) as caught:
        ar.get(30)
    assert caught.value.ename == "KeyboardInterrupt"
    assert v.apply_sync(lambda: 1) == 1


def test_shutdown_of_engines_shrinks_the_pool_newest_first(own_cluster):
    c = own_cluster(3)
    rc = ipp.Client(profile_dir=c.profile)
    try:
        rc.wait_for_engines(3, timeout=30)
        names = {e["id"]: e["name"] for e in rc._ztask.engines()}
        newest = max(rc.ids, key=lambda i: int(names[i].rsplit("-", 1)[-1]))
        others = [i for i in rc.ids if i != newest]
        with pytest.raises(ValueError):
            rc.shutdown(others[0], block=True)
        rc.shutdown(newest, block=True)
        assert rc.ids == others
    finally:
        rc.close()


def test_install_as_makes_an_unchanged_import_find_compat(tmp_path):
    import subprocess

    stand_in = tmp_path / "ipyparallel"
    stand_in.mkdir()
    (stand_in / "__init__.py").write_text("import ztask.compat; ztask.compat.install_as(__name__, __path__)\n")
    (stand_in / "extra.py").write_text("HERE = True\n")
    check = ("import ipyparallel, ztask.compat as z\n"
             "import ipyparallel.client.view as view\n"
             "from ipyparallel import error, extra\n"
             "assert ipyparallel is z and view is z.client.view and error is z.error and extra.HERE\n")
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": "%s:%s" % (tmp_path, package)})
    assert done.returncode == 0, done.stderr


def test_waiting_for_engines_ends_when_the_supervisor_gives_them_up(own_cluster):
    import signal

    c = own_cluster(1, "--max-restarts", "0")
    rc = ipp.Client(profile_dir=c.profile)
    try:
        waiting = rc.wait_for_engines(2, timeout=60, block=False)
        os.kill(rc._ztask.engines()[0]["pid"], signal.SIGKILL)
        with pytest.raises(ipp.error.EngineError):
            waiting.result(60)
    finally:
        rc.close()


def test_client_results_and_metadata_by_msg_id(rc):
    ar = rc[-1].apply_async(pow, 2, 8)
    assert ar.get(30) == 256
    msg_id = ar.msg_ids[0]
    assert rc.results[msg_id] == 256
    assert rc.metadata[msg_id]["engine_id"] == rc.ids[-1] and rc.metadata[msg_id].status == "ok"
    assert msg_id not in rc.results  # the AsyncResult holds them; nothing is kept twice
    rc.results["mine"] = 5
    assert rc.metadata["mine"]["engine_id"] is None and len(rc.metadata) == 1
    rc.purge_local_results("mine")
    assert "mine" not in rc.results and len(rc.metadata) == 0
