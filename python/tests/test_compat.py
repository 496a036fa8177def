"""ztask.compat against a real cluster, as an IPython Parallel program uses
it: the load-balanced view, its flags, AsyncResult, errors in IPython
Parallel's hierarchy, and the truth table of after/follow x all/any x
success/failure."""

import os
import sys
import time

import cloudpickle
import pytest

import ztask.compat as ipp

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def engine():
    return int(os.environ["ZTASK_ENGINE_ID"])


def fail():
    raise RuntimeError("planned failure")


@pytest.fixture
def rc(cluster):
    c = ipp.Client(profile_dir=cluster.profile)
    assert len(c.ids) == 2
    yield c
    c.close()


@pytest.fixture
def view(rc):
    return rc.load_balanced_view()


def test_apply_blocks_or_not_as_the_view_says(view):
    assert view.apply_sync(pow, 2, 10) == 1024
    ar = view.apply_async(pow, 3, 2)
    assert isinstance(ar, ipp.AsyncResult)
    assert ar.get(30) == 9 and ar.ready() and ar.successful()
    assert isinstance(view.apply(pow, 1, 1), ipp.AsyncResult)
    view.block = True
    assert view.apply(pow, 2, 2) == 4


def test_map_returns_results_in_order_and_iterates(view):
    assert view.map_sync(lambda x: x + 1, range(30)) == list(range(1, 31))
    amr = view.map_async(lambda x, y: x * y, range(10), range(10), chunksize=3)
    assert list(amr) == [x * x for x in range(10)]
    assert len(amr.msg_ids) == 10
    assert view.map(abs, [-1, -2], block=True) == [1, 2]


def test_metadata_says_where_and_when_a_task_ran(view, rc):
    ar = view.apply_async(time.sleep, 0.05)
    ar.get(30)
    md = ar.metadata
    assert md["engine_id"] in rc.ids
    assert md["started"] is not None and md["completed"] >= md["started"]
    assert md["status"] == "ok"
    assert md.engine_id == md["engine_id"] and md.completed == md["completed"]


def test_a_remote_exception_is_an_ipp_remote_error(view):
    with pytest.raises(ipp.error.RemoteError) as caught:
        view.apply_sync(fail)
    assert caught.value.ename == "RuntimeError"
    assert "planned failure" in caught.value.evalue
    assert isinstance(caught.value, ipp.error.KernelError)
    with pytest.raises(ipp.error.CompositeError) as many:
        view.map_sync(lambda x: 1 // x, [1, 0, 0])
    assert len(many.value.elist) == 2
    with pytest.raises(ipp.error.RemoteError):
        many.value.raise_exception()


def test_get_with_a_timeout_raises_ipp_timeout_error(view):
    ar = view.apply_async(time.sleep, 2)
    with pytest.raises(ipp.error.TimeoutError):
        ar.get(0.1)
    assert ar.get(30) is None


def test_temp_flags_apply_inside_and_are_restored_after(view, rc):
    target = rc.ids[-1]
    with view.temp_flags(targets=[target], retries=2):
        assert {view.apply_sync(engine) for _ in range(4)} == {target}
        assert view.retries == 2
    assert view.targets is None and view.retries == 0
    view.set_flags(targets=target)
    assert view.apply_sync(engine) == target
    with pytest.raises(KeyError):
        view.set_flags(nonsense=1)


def test_timeout_flag_fails_a_task_that_cannot_start_with_task_timeout(view):
    blocker = view.apply_async(time.sleep, 3)
    with view.temp_flags(after=blocker, timeout=0.3):
        with pytest.raises(ipp.error.TaskTimeout):
            view.apply_sync(pow, 1, 1)
    blocker.abort()


def test_direct_views_pin_tasks_to_their_engines(rc):
    assert rc[:].apply_sync(engine) == rc.ids
    first = rc.ids[0]
    assert rc[first].apply_sync(engine) == first
    assert rc[:].map_sync(lambda x: x * 3, range(6)) == [0, 3, 6, 9, 12, 15]
    with pytest.raises(IndexError):
        rc[99]


def test_require_and_depend_from_compat(view, rc):
    @ipp.require("json")
    def dumps():
        return json.dumps(1)  # noqa: F821

    assert view.apply_sync(dumps) == "1"

    @ipp.require("no_such_module_here")
    def never():
        return 0

    with pytest.raises(ipp.error.ImpossibleDependency):
        view.apply_sync(never)

    wanted = rc.ids[0]

    @ipp.depend(lambda e: os.environ["ZTASK_ENGINE_ID"] == str(e), wanted)
    def where():
        return engine()

    assert {view.apply_sync(where) for _ in range(4)} == {wanted}


def test_raising_unmet_dependency_tries_elsewhere(view, rc):
    wanted = rc.ids[-1]

    def picky():
        if engine() != wanted:
            raise ipp.error.UnmetDependency()
        return engine()

    assert {view.apply_sync(picky) for _ in range(4)} == {wanted}


# ---- the truth table ---------------------------------------------------------
# Two dependencies: one succeeded (on the first engine), one failed (on the
# second). Whether a dependent runs, and for follow where, for each setting.

AFTER = [
    # (all, success, failure): runs?
    ((True, True, False), False),
    ((False, True, False), True),
    ((True, False, True), False),
    ((False, False, True), True),
    ((True, True, True), True),
    ((False, True, True), True),
]


@pytest.fixture
def ok_and_failed(view, rc):
    a, b = rc.ids[0], rc.ids[1]
    with view.temp_flags(targets=[a]):
        ok = view.apply_async(engine)
    with view.temp_flags(targets=[b]):
        bad = view.apply_async(fail)
    ok.wait(30)
    bad.wait(30)
    return ok, bad, a, b


def dependent(view, ok_and_failed, settings, flag, f, *args):
    """f(*args) submitted with `flag` (after or follow) on both tasks."""
    ok, bad, _, _ = ok_and_failed
    all_, success, failure = settings
    dep = ipp.Dependency(ok.msg_ids + bad.msg_ids, all=all_, success=success, failure=failure)
    with view.temp_flags(**{flag: dep}):
        return view.apply_async(f, *args)


@pytest.mark.parametrize("settings, runs", AFTER)
def test_after_truth_table(view, ok_and_failed, settings, runs):
    ar = dependent(view, ok_and_failed, settings, "after", pow, 2, 3)
    if runs:
        assert ar.get(30) == 8
    else:
        with pytest.raises(ipp.error.ImpossibleDependency):
            ar.get(30)


FOLLOW = [
    # (all, success, failure): runs where? None: ImpossibleDependency
    ((True, True, False), None),   # the failed one is not accepted
    ((False, True, False), "ok"),  # any: where the succeeded one ran
    ((False, False, True), "bad"),  # any failure: where the failed one ran
    ((True, True, True), None),    # all, but they ran on two engines
    ((False, True, True), "either"),
]


@pytest.mark.parametrize("settings, where", FOLLOW)
def test_follow_truth_table(view, ok_and_failed, settings, where):
    _, _, a, b = ok_and_failed
    ar = dependent(view, ok_and_failed, settings, "follow", engine)
    if where is None:
        with pytest.raises(ipp.error.ImpossibleDependency):
            ar.get(30)
    else:
        expected = {"ok": {a}, "bad": {b}, "either": {a, b}}[where]
        assert ar.get(30) in expected


def test_follow_all_on_one_engine_runs_there(view, rc):
    target = rc.ids[1]
    with view.temp_flags(targets=[target]):
        deps = [view.apply_async(engine) for _ in range(3)]
    for d in deps:
        d.get(30)
    with view.temp_flags(follow=deps):
        assert view.apply_sync(engine) == target


def test_a_client_with_no_cluster_says_what_to_do(tmp_path):
    import ztask

    with pytest.raises(ztask.ClusterError, match="taskcluster start"):
        ipp.Client(profile_dir=str(tmp_path))


def test_remote_and_parallel_decorators_run_on_the_view(view):
    @view.remote(block=True)
    def double(x):
        return 2 * x

    assert double(21) == 42

    @view.parallel(block=True)
    def triple(x):
        return 3 * x

    assert triple.map(range(4)) == [0, 3, 6, 9]
    assert triple(range(3)) == [0, 3, 6]


def test_stdout_of_an_async_result(view):
    ar = view.apply_async(print, "hello")
    ar.get(30)
    assert ar.stdout == "hello\n"
