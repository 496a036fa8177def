"""ztask.compat's engines' namespaces against a real cluster, as IPython
Parallel's documentation uses them: engines by index (rc[-1]), push, pull,
execute, run, scatter, gather, view[name], Reference, interactive,
sync_imports, clear, require of names, and a worker lost is a namespace
lost."""

import os
import sys

import cloudpickle
import pytest

import ztask.compat as ipp

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture
def rc(cluster):
    c = ipp.Client(profile_dir=cluster.profile)
    c.wait_for_engines(2, timeout=30)
    c.clear(block=True)
    yield c
    c.close()


def test_negative_indices_count_from_the_last_engine(rc):
    ids = rc.ids
    assert rc[-1].targets == ids[-1]
    assert rc[-2:].targets == ids[-2:]
    assert rc.direct_view(-1).targets == ids[-1]
    assert rc.load_balanced_view(-1).targets == [ids[-1]]
    assert rc[-1].apply_sync(lambda: int(os.environ["ZTASK_ENGINE_ID"])) == ids[-1]
    with pytest.raises(IndexError):
        rc[-len(ids) - 1]
    with pytest.raises(TypeError):
        rc[None]


def test_push_pull_and_item_access_work_per_engine(rc):
    dview = rc[:]
    dview.block = True
    dview.push({"a": 10, "b": [1, 2]})
    assert dview.pull("a") == [10, 10]
    assert dview.pull(["a", "b"]) == [[10, [1, 2]]] * 2
    rc[-1]["a"] = 11
    assert rc[-1]["a"] == 11 and rc[0]["a"] == 10
    assert isinstance(rc[-1].pull("a", block=False), ipp.AsyncResult)


def test_execute_runs_code_in_the_namespace_and_reports(rc):
    v = rc[-1]
    v.block = True
    v.execute("x = 6 * 7")
    assert v["x"] == 42
    ar = v.execute("x + 1", silent=False)
    assert isinstance(ar, ipp.AsyncResult) and ar.ready()
    reply = ar.get()
    assert reply.execute_result["data"]["text/plain"] == "43"
    assert str(reply) == "<ExecuteReply[%d]: 43>" % reply.execution_count
    assert v.execute("print(x)").stdout == "42\n"
    with pytest.raises(ipp.RemoteError) as caught:
        v.execute("1 / 0")
    assert caught.value.ename == "ZeroDivisionError"


def test_interactive_functions_see_the_engine_namespace(rc):
    @ipp.interactive
    def get_a():
        return a  # noqa: F821

    v = rc[-1]
    v.block = True
    with pytest.raises(ipp.RemoteError) as caught:
        v.apply(get_a)
    assert caught.value.ename == "NameError"
    v["a"] = "engine"
    assert v.apply(get_a) == "engine"
    v["f"] = get_a
    v.execute("b = f()")
    assert v["b"] == "engine"


def test_references_are_looked_up_on_the_engine(rc):
    v = rc[:]
    v.scatter("rank", rc.ids, flatten=True, block=True)
    assert v.apply_sync(lambda r: r, ipp.Reference("rank")) == rc.ids
    assert v.apply_sync(lambda x: x, [ipp.Reference("rank")]) == [[i] for i in rc.ids]
    v.execute("f = lambda x: x * rank", block=True)
    assert v.apply_sync(ipp.Reference("f"), 2) == [2 * i for i in rc.ids]


def test_scatter_and_gather_split_and_join_in_engine_order(rc):
    v = rc[:]
    v.scatter("part", list(range(11)), block=True)
    parts = v.pull("part", block=True)
    assert [len(p) for p in parts] == [6, 5]
    assert v.gather("part", block=True) == list(range(11))
    assert isinstance(v.gather("part"), ipp.AsyncMapResult)


def test_sync_imports_import_on_the_engines_too(rc, capsys):
    v = rc[-1]
    with v.sync_imports():
        import json  # noqa: F401
    assert "importing json on engine(s)" in capsys.readouterr().out

    @ipp.interactive
    def has_json():
        return "json" in globals()

    assert v.apply_sync(has_json)


def test_clear_forgets_what_the_engines_hold(rc):
    rc[:].push({"a": 1}, block=True)
    rc.clear(targets=rc.ids[-1], block=True)
    assert rc[0]["a"] == 1
    with pytest.raises(ipp.RemoteError):
        rc[-1]["a"]
    rc.clear(block=True)
    with pytest.raises(ipp.RemoteError):
        rc[0]["a"]


def test_run_executes_a_file_on_the_engines(rc, tmp_path):
    script = tmp_path / "script.py"
    script.write_text("def g():\n    return 5")
    v = rc[-1]
    v.run(str(script), block=True)
    assert v.apply_sync(lambda g: g(), ipp.Reference("g")) == 5


def test_require_puts_named_objects_in_the_namespace(rc):
    @ipp.interactive
    def square(x):
        return x * x

    @ipp.require(square)
    @ipp.interactive
    def use(x):
        return square(x)  # noqa: F821

    @ipp.require(sq=square)
    @ipp.interactive
    def use_as(x):
        return sq(x)  # noqa: F821

    view = rc.load_balanced_view()
    assert view.apply_sync(use, 3) == 9
    assert view.apply_sync(use_as, 4) == 16


def test_use_cloudpickle_keeps_the_globals_a_function_came_with(rc):
    import __main__

    @ipp.interactive
    def get_c():
        return _c  # noqa: F821

    v = rc[-1]
    v["_c"] = "engine"
    __main__._c = "client"
    try:
        assert v.apply_sync(get_c) == "engine"
        v.use_cloudpickle()
        assert v.apply_sync(get_c) == "client"
    finally:
        v.use_pickle()
        del __main__._c


def test_a_new_worker_is_a_new_namespace(own_cluster):
    c = own_cluster(1)
    rc = ipp.Client(profile_dir=c.profile)
    try:
        v = rc[0]
        v["a"] = 1
        with pytest.raises(ipp.error.EngineError):
            v.apply_sync(os._exit, 1)
        with pytest.warns(RuntimeWarning, match="its namespace is a new one"):
            with pytest.raises(ipp.RemoteError) as caught:
                v["a"]
        assert caught.value.ename == "NameError"
    finally:
        rc.close()


def test_become_dask_makes_the_engines_the_workers_of_a_dask_cluster(rc):
    import distributed

    executor = rc.become_dask()
    address = executor.scheduler.address
    # Where the cluster is: on loopback here, never every interface.
    assert address.startswith("tcp://127.0.0.1:"), address
    try:
        reprs = rc[:].apply_sync(repr, ipp.Reference("distributed_worker"))
        assert len(reprs) == len(rc.ids)
        assert all("Worker" in r for r in reprs), reprs
        # The engines are its workers: the tasks run in their processes.
        assert len(executor.scheduler_info()["workers"]) == len(rc.ids)
        squares = executor.map(lambda x: x * x, range(10))
        assert executor.submit(sum, squares).result(timeout=60) == 285
        pids = set(executor.run(os.getpid).values())
        assert pids == set(rc[:].apply_sync(os.getpid))
        # Again: the same scheduler, no second worker.
        again = rc.become_dask()
        assert again.scheduler.address == executor.scheduler.address
        assert len(again.scheduler_info()["workers"]) == len(rc.ids)
        again.close()
    finally:
        executor.close()
        rc.stop_dask()
    with pytest.raises(ipp.RemoteError) as failed:
        rc[:].apply_sync(lambda x: x, ipp.Reference("distributed_worker"))
    assert "NameError" in str(failed.value)
    with pytest.raises(OSError):
        distributed.Client(address, timeout=2)


def test_closing_the_client_stops_what_become_dask_started(cluster):
    c = ipp.Client(profile_dir=cluster.profile)
    c.wait_for_engines(2, timeout=30)
    executor = c.become_dask()
    address = executor.scheduler.address
    executor.close()
    c.close()
    other = ipp.Client(profile_dir=cluster.profile)
    try:
        with pytest.raises(ipp.RemoteError):
            other[:].apply_sync(lambda x: x, ipp.Reference("distributed_worker"))
    finally:
        other.close()
    import distributed

    with pytest.raises(OSError):
        distributed.Client(address, timeout=2)


def test_a_dask_scheduler_beyond_loopback_is_warned_of():
    from ztask.compat.client.dask import _loopback

    assert _loopback("127.0.0.1") and _loopback("::1") and _loopback("localhost")
    assert not _loopback("192.0.2.7") and not _loopback("0.0.0.0") and not _loopback("example.org")
