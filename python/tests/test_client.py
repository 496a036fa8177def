"""The Python client against a real cluster: Python functions, commands and
engine functions as tasks, their futures, errors and dependencies."""

import concurrent.futures
import os
import sys
import threading
import time

import cloudpickle
import pytest

import ztask

# Functions of this module travel by value: the engines cannot import it.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def square(x):
    return x * x


def add(x, y=0, *, z=0):
    return x + y + z


def raise_value_error(text):
    raise ValueError(text)


def chatty(x):
    print("out", x)
    print("err", x, file=sys.stderr)
    return x


def engine_id():
    return int(os.environ["ZTASK_ENGINE_ID"])


def crash_on_first_attempt():
    if os.environ["ZTASK_ATTEMPT"] == "1":
        os._exit(7)
    return "second attempt"


def test_a_python_function_runs_on_an_engine_and_returns_its_value(client):
    f = client.submit(add, 1, 2, z=3)
    assert isinstance(f, ztask.Future) and isinstance(f, concurrent.futures.Future)
    assert f.result(30) == 6
    assert f.engine_id in client.ids
    assert len(f.id) == 32 and int(f.id, 16) >= 0


def test_lambdas_closures_and_objects_travel(client):
    base = {"k": [1, 2, 3]}
    assert client.submit(lambda: base["k"] + [4]).result(30) == [1, 2, 3, 4]
    assert client.submit(set, [1, 2, 2]).result(30) == {1, 2}


def test_a_raised_exception_is_a_remote_error_with_its_traceback(client):
    f = client.submit(raise_value_error, "bad input")
    with pytest.raises(ztask.RemoteError) as caught:
        f.result(30)
    e = caught.value
    assert (e.ename, e.evalue) == ("ValueError", "bad input")
    assert "raise_value_error" in e.traceback and "ValueError: bad input" in e.traceback
    assert isinstance(e, ztask.TaskFailed) and isinstance(e, ztask.TaskError)
    assert e.task_id == f.id
    assert f.record["error_type"] == "TaskFailed"


def test_what_a_function_prints_is_captured_in_its_record(client):
    f = client.submit(chatty, 5)
    assert f.result(30) == 5
    record = f.record
    assert record["stdout"] == "out 5\n"
    assert record["stderr"] == "err 5\n"
    assert record["state"] == "ok" and record["id"] == f.id


def test_a_command_returns_its_exit_code_and_output(client, tmp_path):
    f = client.command(["sh", "-c", 'echo "$GREETING $(pwd)"; echo oops >&2'], cwd=tmp_path,
                       env={"GREETING": "hi"})
    r = f.result(30)
    assert r == ztask.CommandResult(0, "hi %s\n" % tmp_path, "oops\n")
    failed = client.command(["sh", "-c", "echo partial; exit 3"])
    with pytest.raises(ztask.TaskFailed) as caught:
        failed.result(30)
    assert caught.value.result.exit_code == 3 and caught.value.result.stdout == "partial\n"


def test_an_engine_function_is_called_by_name(client):
    assert client.call("sum", [1, 2, [3, 4]]).result(30) == 10
    assert client.call("echo", {"a": [1, "b"]}).result(30) == {"a": [1, "b"]}
    with pytest.raises(ztask.TaskFailed, match="no function named 'nope'"):
        client.call("nope").result(30)


def test_map_returns_futures_in_order_with_or_without_chunks(client):
    assert client.gather(client.map(square, range(50))) == [x * x for x in range(50)]
    fs = client.map(add, range(10), range(10, 20), chunksize=4)
    assert len(fs) == 10
    assert client.gather(fs) == [x + y for x, y in zip(range(10), range(10, 20))]
    assert len({f.id for f in fs}) == 3  # three tasks of at most 4 calls


def test_an_error_in_a_chunk_fails_every_future_of_the_chunk(client):
    fs = client.map(lambda x: 1 // x, [1, 0, 2], chunksize=3)
    for f in fs:
        with pytest.raises(ztask.RemoteError, match="ZeroDivisionError"):
            f.result(30)


def test_as_completed_and_wait_work_from_ztask_and_the_standard_library(client):
    fs = client.map(square, range(20))
    assert sorted(f.result() for f in ztask.as_completed(fs, timeout=30)) == [x * x for x in range(20)]
    done, not_done = concurrent.futures.wait(fs, timeout=30)
    assert len(done) == 20 and not not_done
    slow = client.submit(time.sleep, 30)
    fast = client.submit(square, 3)
    done, not_done = ztask.wait([slow, fast], timeout=30, return_when=ztask.FIRST_COMPLETED)
    assert fast in done and slow in not_done
    assert slow.cancel() is False  # it runs already
    client.abort([slow])


def test_after_runs_a_task_once_its_dependencies_succeeded(client, tmp_path):
    marker = tmp_path / "first"
    first = client.command(["sh", "-c", "sleep 0.3; touch %s" % marker])
    second = client.submit(os.path.exists, str(marker), after=[first])
    assert second.result(30) is True


def test_after_a_failure_is_impossible_unless_failure_is_accepted(client):
    bad = client.submit(raise_value_error, "x")
    never = client.submit(square, 2, after=bad)
    on_failure = client.submit(square, 3, after=ztask.Dependency([bad], success=False, failure=True))
    with pytest.raises(ztask.ImpossibleDependency):
        never.result(30)
    assert on_failure.result(30) == 9


def test_follow_runs_where_its_dependency_ran(client):
    first = client.submit(engine_id)
    where = first.result(30)
    for _ in range(5):
        assert client.submit(engine_id, follow=first).result(30) == where


def test_targets_pin_a_task_to_engines(client):
    for e in client.ids:
        assert client.submit(engine_id, targets=e).result(30) == e


def test_an_unknown_dependency_is_invalid(client):
    f = client.submit(square, 1, after="0" * 32)
    with pytest.raises(ztask.InvalidDependency):
        f.result(30)


def test_a_task_not_started_within_its_timeout_fails_with_task_timeout(client):
    blocker = client.submit(time.sleep, 3)
    late = client.submit(square, 1, after=blocker, timeout=0.3)
    with pytest.raises(ztask.TaskTimeout):
        late.result(30)
    client.abort([blocker])


def test_a_python_task_over_its_time_limit_is_killed_and_the_next_one_runs(client):
    f = client.submit(time.sleep, 30, time_limit=0.5)
    with pytest.raises(ztask.TimeLimitExceeded):
        f.result(30)
    assert client.submit(square, 4, targets=f.engine_id).result(30) == 16


def test_a_crash_of_the_python_worker_is_an_engine_error_or_a_retry(client):
    f = client.submit(os._exit, 3)
    with pytest.raises(ztask.EngineError, match="Python worker exited with code 3"):
        f.result(30)
    assert client.submit(crash_on_first_attempt, retries=1).result(30) == "second attempt"
    # The engine itself lives on, and so does its next worker.
    assert client.submit(square, 5, targets=f.engine_id).result(30) == 25


def test_require_sends_a_task_where_its_modules_import_or_fails_it(client):
    @ztask.require("json")
    def uses_json():
        return json.dumps([1])  # noqa: F821 (imported by require)

    assert uses_json.__ztask_require__ == ("json",)
    assert client.submit(uses_json).result(30) == "[1]"

    @ztask.require("a_module_no_engine_has")
    def impossible():
        return 1

    with pytest.raises(ztask.ImpossibleDependency, match="a_module_no_engine_has"):
        client.submit(impossible, retries=3).result(30)


def test_depend_runs_a_task_only_where_its_check_holds(client):
    wanted = max(client.ids)

    def on_engine(e):
        return os.environ.get("ZTASK_ENGINE_ID") == str(e)

    @ztask.depend(on_engine, wanted)
    def where():
        return int(os.environ["ZTASK_ENGINE_ID"])

    assert {client.submit(where).result(30) for _ in range(6)} == {wanted}


def test_raising_unmet_dependency_tries_another_engine(client):
    def only_on(e):
        if os.environ["ZTASK_ENGINE_ID"] != str(e):
            raise ztask.UnmetDependency("not this one")
        return e

    wanted = min(client.ids)
    assert client.gather([client.submit(only_on, wanted) for _ in range(6)]) == [wanted] * 6


def test_a_command_exiting_with_the_unmet_code_is_tried_elsewhere_then_impossible(client):
    f = client.command(["sh", "-c", 'exit "$ZTASK_UNMET_EXIT_CODE"'])
    with pytest.raises(ztask.ImpossibleDependency, match="unmet"):
        f.result(30)
    assert f.record["attempts"] == len(client.ids)


def test_get_gives_a_future_for_any_task_from_any_client(client, cluster):
    f = client.submit(time.sleep, 0.5)
    with ztask.Client(cluster.profile) as other:
        g = other.get(f.id)
        assert g.result(30) is None
        assert g.engine_id == f.result(30) or g.engine_id in other.ids
        command = client.command(["echo", "x"])
        assert other.get(command.id).result(30).stdout == "x\n"
        with pytest.raises(ValueError, match="no task"):
            other.get("f" * 32)


def test_cancel_aborts_a_task_that_has_not_started(client):
    blockers = [client.submit(time.sleep, 1) for _ in range(12)]
    waiting = client.submit(square, 2, after=blockers)
    assert waiting.cancel() is True
    assert waiting.cancelled()
    with pytest.raises(concurrent.futures.CancelledError):
        waiting.result(30)
    outcome = client.abort(blockers)
    assert set(outcome) == {"aborted", "running", "finished", "unknown"}
    assert len(outcome["aborted"]) + len(outcome["running"]) + len(outcome["finished"]) == 12
    for b in blockers:
        concurrent.futures.wait([b], timeout=30)


def test_abort_reaches_a_task_queued_on_its_engine_behind_a_long_one(own_cluster):
    # As IPython Parallel's abort: a task sent to an engine that has not
    # started it yet is aborted too (the scheduler asks it back), while the
    # one running goes on.
    cluster = own_cluster(1, "--hwm", "4")
    with ztask.Client(cluster.profile) as c:
        c.wait_for_engines(1, 30)
        long = c.submit(time.sleep, 3)
        queued = c.submit(square, 3)
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:  # both on the engine, as the hub hears it
            held = sum(e["running"] + e["queued"] for e in c.status()["engines"].values())
            if held == 2:
                break
            time.sleep(0.02)
        else:
            pytest.fail("the engine never held both tasks")
        outcome = c.abort([queued])
        assert outcome["running"] == [queued.id], "it was on the engine"
        with pytest.raises(ztask.TaskAborted):
            queued.result(30)
        assert long.result(30) is None


def test_many_threads_submit_and_wait_at_once(client):
    results = {}

    def work(k):
        fs = [client.submit(add, k, i) for i in range(200)]
        results[k] = client.gather(fs, timeout=60)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert results == {k: [k + i for i in range(200)] for k in range(4)}


def test_engines_and_status_describe_the_cluster(client):
    engines = client.engines()
    assert len([e for e in engines if e["state"] == "running"]) == 2
    assert {"id", "name", "host", "pid", "state"} <= set(engines[0])
    status = client.status()
    assert set(status) == {"engines", "unassigned"}
    assert set(status["engines"]) <= set(client.ids)


def test_progress_waits_for_every_future_and_draws_only_on_a_terminal(client, capsys):
    fs = client.map(square, range(30))
    client.progress(fs)
    assert all(f.done() for f in fs)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "options, message",
    [
        ({"timeout": -1}, "timeout"),
        ({"retries": 1.5}, "retries"),
        ({"targets": ["a"]}, "targets"),
        ({"after": "not-an-id"}, "not a task id"),
        ({"priority": "high"}, "priority"),
    ],
)
def test_wrong_options_are_refused_before_anything_is_sent(client, options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        client.submit(square, 1, **options)


def test_wrong_arguments_are_refused_with_what_to_do(client):
    with pytest.raises(TypeError, match="callable"):
        client.submit(42)
    with pytest.raises(ValueError, match="list of strings"):
        client.command("echo hi")
    with pytest.raises(TypeError, match="unknown option"):
        client.command(["true"], retry=2)
    with pytest.raises(TypeError, match="cannot be sent"):
        client.call("echo", object())
    with pytest.raises(TypeError, match="cannot send"):
        client.submit(lambda: None, threading.Lock())


def test_no_cluster_is_a_cluster_error_that_says_what_to_do(tmp_path):
    with pytest.raises(ztask.ClusterError, match="taskcluster start --profile-dir"):
        ztask.Client(tmp_path)


def test_a_profile_name_is_its_directory_under_home(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    named = tmp_path / ".ztask" / "profile_sweep"
    with pytest.raises(ztask.ClusterError, match=str(named)):
        ztask.Client(profile="sweep")
    named.parent.mkdir()
    named.symlink_to(cluster.profile)
    c = ztask.Client(profile="sweep")
    try:
        assert c.call("noop").result(30) is None
    finally:
        c.close()
    for bad in ("a/b", "..", ""):
        with pytest.raises(ValueError, match="not a profile name"):
            ztask.Client(profile=bad)
    with pytest.raises(ValueError, match="not both"):
        ztask.Client(cluster.profile, profile="sweep")


def test_a_connection_file_others_may_read_is_refused(cluster, tmp_path):
    copy = tmp_path / "ztask-cluster.json"
    with open(os.path.join(cluster.profile, "ztask-cluster.json")) as f:
        copy.write_text(f.read())
    os.chmod(copy, 0o644)
    with pytest.raises(ztask.ClusterError, match="chmod 600"):
        ztask.Client(tmp_path)


def test_the_readme_example_runs(cluster, monkeypatch, capsys):
    readme = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Python"):]
    code = section[section.index("```python\n") + 10:]
    code = code[:code.index("```")]
    monkeypatch.setenv("ZTASK_PROFILE_DIR", cluster.profile)
    exec(compile(code, "README.md", "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out
    assert out.endswith("1024 hi\n %d\n" % sum(x * x for x in range(1000)))
    assert len(out.splitlines()) == 5  # three (engine, result) lines first


def test_tasks_outlive_a_killed_scheduler_and_every_future_gets_its_result(own_cluster):
    import signal

    from conftest import wait_until

    cluster = own_cluster(2, "--hwm", "8")
    with ztask.Client(cluster.profile) as c:
        c.wait_for_engines(2, 30)
        first = c.map(time.sleep, [0.01] * 300)
        [old] = cluster.server("scheduler")
        os.kill(old, signal.SIGKILL)
        # Submitted while the scheduler is down: sent again once it is back.
        second = c.map(square, range(300))
        wait_until(lambda: cluster.server("scheduler") not in ([], [old]), 60, "a new scheduler")
        assert c.gather(first, timeout=120) == [None] * 300
        assert c.gather(second, timeout=120) == [x * x for x in range(300)]
        records = [c.get(f.id).result(30) for f in second[:5]]
        assert records == [0, 1, 4, 9, 16]


def test_a_thread_waiting_for_a_slow_task_does_not_hold_up_others(client):
    slow = client.submit(time.sleep, 3)
    started = time.monotonic()
    waiter = threading.Thread(target=lambda: slow.result(30))
    waiter.start()  # it drives the client's loop while it waits
    time.sleep(0.1)
    quick = client.submit(square, 7)
    assert quick.result(30) == 49
    t_quick = time.monotonic() - started
    total = client.call("sum", [1, 2])
    assert total.result(30) == 3
    assert time.monotonic() - started < 2.5, (t_quick, slow.engine_id, quick.engine_id, total.engine_id)
    with pytest.raises(concurrent.futures.TimeoutError):
        client.submit(time.sleep, 3).result(0.3)
    assert time.monotonic() - started < 2.9
    waiter.join(30)
    assert slow.done() and slow.result() is None


def test_an_engine_without_its_python_fails_python_tasks_clearly_and_runs_the_rest(own_cluster):
    cluster = own_cluster(1, env={"ZTASK_PYTHON": "/nonexistent/python3"})
    with ztask.Client(cluster.profile) as c:
        c.wait_for_engines(1, 30)
        with pytest.raises(ztask.EngineError, match="cannot run the Python interpreter '/nonexistent/python3'"):
            c.submit(square, 2).result(30)
        assert c.command(["echo", "still here"]).result(30).stdout == "still here\n"
        assert c.call("sum", [2, 3]).result(30) == 5


def test_a_worker_that_stops_reading_is_held_to_the_time_limit(client, tmp_path):
    from conftest import wait_until

    go, holding = tmp_path / "go", tmp_path / "holding"

    def hog(go, holding):
        import ctypes
        import threading

        def take_the_interpreter():
            while not os.path.exists(go):
                time.sleep(0.01)
            open(holding, "w").close()
            ctypes.PyDLL(None).sleep(20)  # holds the interpreter's lock: nothing else runs

        threading.Thread(target=take_the_interpreter, daemon=True).start()
        return int(os.environ["ZTASK_ENGINE_ID"])

    engine = client.submit(hog, str(go), str(holding)).result(30)
    go.touch()
    wait_until(holding.exists, 10, "the worker's thread holding the interpreter")
    # More than a pipe holds: the engine cannot write it all to a worker
    # that does not read, and must not wait past the task's time limit.
    started = time.monotonic()
    big = client.submit(len, b"x" * (1 << 20), targets=engine, time_limit=1)
    with pytest.raises(ztask.TimeLimitExceeded):
        big.result(15)
    assert time.monotonic() - started < 10
    assert client.submit(square, 3, targets=engine).result(30) == 9


def test_a_worker_that_died_between_tasks_is_replaced(client, tmp_path):
    from conftest import wait_until

    def die_soon():
        import threading

        threading.Timer(0.05, os._exit, [9]).start()
        return os.getpid(), int(os.environ["ZTASK_ENGINE_ID"])

    pid, engine = client.submit(die_soon).result(30)
    wait_until(lambda: not os.path.exists("/proc/%d" % pid) or
               open("/proc/%d/stat" % pid).read().split()[2] == "Z", 10, "the worker's end")
    # Its engine writes the next task into a closed pipe: that task is an
    # EngineError, the engine lives, a new worker takes the one after.
    with pytest.raises(ztask.EngineError, match="Python worker"):
        client.submit(square, 4, targets=engine).result(30)
    assert client.submit(square, 5, targets=engine).result(30) == 25
    assert engine in client.ids


def test_closing_a_client_fails_what_it_still_waits_for_instead_of_hanging(cluster):
    c = ztask.Client(cluster.profile)
    f = c.submit(time.sleep, 2)
    c.close()
    with pytest.raises(ztask.ClusterError, match="closed"):
        f.result(10)
    with pytest.raises(ztask.ClusterError, match="closed"):
        c.submit(square, 1)


def test_an_engine_reuses_its_python_worker_between_tasks(client):
    engine = client.ids[0]
    pids = {client.submit(os.getpid, targets=engine).result(30) for _ in range(5)}
    assert len(pids) == 1


def test_progress_draws_a_bar_on_a_terminal(client):
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    fs = client.map(square, range(30))
    client.progress(fs, file=out)
    assert all(f.done() for f in fs)
    assert "30/30" in out.getvalue()


def _gpus_seen():
    return os.environ.get("ZTASK_SLOTS"), os.environ.get("ZTASK_RESOURCE_GPUS"), os.environ.get("CUDA_VISIBLE_DEVICES")


def test_a_task_holds_the_slots_and_gpus_it_asks_and_sees_which(own_cluster):
    cluster = own_cluster(1, "--resource", "gpus=2")
    with ztask.Client(str(cluster.profile)) as c:
        c.wait_for_engines(1, 30)
        assert c.submit(_gpus_seen, resources={"gpus": 2}).result(60) == ("1", "0,1", "0,1")
        # The next task in the same Python worker is given none of them.
        assert c.submit(_gpus_seen).result(60) == ("1", None, None)
        with pytest.raises(ztask.Unsatisfiable, match="needs gpus=3, the largest engine has 2"):
            c.submit(_gpus_seen, resources={"gpus": 3}).result(60)
        with pytest.raises(ztask.Unsatisfiable, match="needs 2 slots"):
            c.submit(_gpus_seen, slots=2).result(60)
        for bad in ({"GPUs": 1}, {"gpus": -1}, {"gpus": 1.5}, ["gpus"]):
            with pytest.raises(ValueError):
                c.submit(_gpus_seen, resources=bad)
        with pytest.raises(ValueError):
            c.submit(_gpus_seen, slots=0)


def test_futures_fail_with_cluster_error_once_the_cluster_is_gone_past_the_limit(own_cluster, caplog):
    # The cluster goes under a waiting client, its tasks unfinished: the
    # supervisor first (nothing starts the others again), then the
    # scheduler and the hub. (A `taskcluster stop` stops the engines first,
    # which may fail the tasks before the scheduler goes.) The futures fail,
    # naming the profile, once the scheduler has been unreachable for the
    # limit, and the client said once, past a few seconds, that it waits.
    import signal

    cluster = own_cluster(1)
    with ztask.Client(cluster.profile, unreachable_timeout=7) as c:
        c.wait_for_engines(1, 30)
        running = c.command(["sleep", "60"])
        waiting = c.command(["true"])  # HWM 1: it waits in the scheduler
        servers = set(cluster.server("scheduler") + cluster.server("hub"))
        engines = cluster.children("taskengine")
        stopped = time.monotonic()  # its children may die with it (PR_SET_PDEATHSIG)
        os.kill(cluster.pid, signal.SIGKILL)
        for pid in servers:
            os.kill(pid, signal.SIGKILL)
        try:
            with caplog.at_level("WARNING", logger="ztask"):
                with pytest.raises(ztask.ClusterError, match="has not been reachable for 7 s") as e:
                    waiting.result()  # no timeout: it must not block for ever
                waited = time.monotonic() - stopped
            assert cluster.profile in str(e.value)
            assert 7 <= waited < 20, waited
            said = [r.getMessage() for r in caplog.records if "has not been reachable" in r.getMessage()]
            assert len(said) == 1, said
            with pytest.raises(ztask.ClusterError):
                running.result(5)
        finally:
            for pid in engines:
                os.kill(pid, signal.SIGKILL)


def test_a_task_longer_than_the_unreachable_limit_on_a_healthy_cluster_succeeds(cluster):
    # The limit counts only while the scheduler cannot be reached: a client
    # that missed seeing its first connection took it for unreachable.
    for _ in range(3):
        with ztask.Client(cluster.profile, unreachable_timeout=1) as c:
            assert c.command(["sleep", "2"]).result(30).exit_code == 0


def test_the_unreachable_limit_must_be_a_number_of_seconds(cluster):
    with pytest.raises(ValueError, match="unreachable_timeout"):
        ztask.Client(cluster.profile, unreachable_timeout=-1)


def test_a_result_pickled_out_of_its_own_buffer_comes_back_whole(cluster):
    # A numpy array (and anything whose reduction gives a PickleBuffer)
    # reaches the pickler's sink as the buffer itself, not as bytes.
    def big_buffer():
        import pickle

        return pickle.PickleBuffer(bytearray(b"z" * 1_000_000))

    with ztask.Client(cluster.profile) as c:
        assert c.submit(big_buffer).result(60) == bytearray(b"z" * 1_000_000)


def test_a_result_far_over_the_limit_fails_naming_it_and_the_worker_is_kept(own_cluster, tmp_path):
    # Past what the engine keeps of its worker's answer, the result is
    # dropped as it comes: TaskFailed naming the limit, not an engine
    # fault, not retried (it would be as large anywhere), and the same
    # worker runs the next task.
    runs = tmp_path / "runs"

    def huge():
        with open(runs, "a") as f:
            f.write("run\n")
        return b"x" * 100_000_000

    cluster = own_cluster(1)
    with ztask.Client(cluster.profile) as c:
        c.wait_for_engines(1, 30)
        before = c.submit(os.getpid).result(60)
        with pytest.raises(ztask.TaskFailed, match="100000009 bytes, over .*--max-result-bytes"):
            c.submit(huge, retries=2).result(120)
        assert runs.read_text() == "run\n", "not retried"
        assert c.submit(os.getpid).result(60) == before, "the worker was kept"


def test_a_result_over_the_limit_is_not_retried(own_cluster, tmp_path):
    runs = tmp_path / "runs"

    def big():
        with open(runs, "a") as f:
            f.write("run\n")
        return b"x" * 2_000_000

    cluster = own_cluster(1, "--max-result-bytes", "1000000")
    with ztask.Client(cluster.profile) as c:
        c.wait_for_engines(1, 30)
        with pytest.raises(ztask.TaskFailed, match="over the engine's limit"):
            c.submit(big, retries=2).result(60)
        assert runs.read_text() == "run\n", "not retried"


def test_what_a_function_prints_past_the_limit_is_cut_and_the_task_succeeds(own_cluster):
    # Far more than the engine keeps of an answer (90 MB; the output limit
    # is 1 MiB): its output is kept to the limit and marked truncated, as a
    # command's is, and the task succeeds.
    def loud():
        sys.stdout.write("o" * 90_000_000)
        return 42

    cluster = own_cluster(1)
    with ztask.Client(cluster.profile) as c:
        c.wait_for_engines(1, 30)
        f = c.submit(loud)
        assert f.result(120) == 42
        record = f.record
        assert record["stdout"] == "o" * (1 << 20)
        assert record["stdout_truncated"] is True


def _peak_mb():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def test_the_worker_holds_no_more_of_what_a_task_prints_or_returns_than_the_limits(own_cluster):
    # 300 MB printed a megabyte at a time, then a 200 MB result: the
    # worker's peak memory grows by the result itself, never by a copy of
    # the output or of the result's pickle (the engine's limits: 1 MiB of
    # output, 16 MiB of result).
    def loud():
        line = "o" * (1 << 20)
        for _ in range(300):
            sys.stdout.write(line)
        return 1

    def big():
        return b"x" * 200_000_000

    cluster = own_cluster(1)
    with ztask.Client(cluster.profile) as c:
        c.wait_for_engines(1, 30)
        worker = c.submit(os.getpid).result(60)
        base = c.submit(_peak_mb).result(60)
        printed = c.submit(loud)
        assert printed.result(120) == 1
        assert printed.record["stdout_truncated"] is True
        after_print = c.submit(_peak_mb).result(60)
        assert after_print - base < 64, "printing 300 MB grew the worker from %d to %d MB" % (
            base, after_print)
        with pytest.raises(ztask.TaskFailed, match=r"\d+ bytes, over .*--max-result-bytes"):
            c.submit(big, retries=2).result(120)
        after_result = c.submit(_peak_mb).result(60)
        assert after_result - base < 200 + 64, "a 200 MB result grew the worker from %d to %d MB" % (
            base, after_result)
        assert c.submit(os.getpid).result(60) == worker, "the same worker throughout"
