"""taskdash over HTTP against real clusters: /metrics in Prometheus' format
with the hub's counts, the JSON API, the token, hostile clients, and a
dashboard or hub killed mid-run."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from conftest import graph_file, program, wait_until


def metrics(cluster):
    status, body = cluster.get("/metrics")
    assert status == 200, body
    samples = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def children(cluster, name):
    with open(os.path.join(cluster.profile, "cluster.pid")) as f:
        parent = int(f.read())
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/comm" % entry) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if ppid == parent and comm == name:
            out.append(int(entry))
    return out


def run_graph(cluster, tmp_path):
    path, ok, failed = graph_file(tmp_path / "graph.json")
    out = cluster.taskctl("submit-graph", str(path)).stdout
    by_name = dict(line.split() for line in out.splitlines())
    ids = list(by_name.values())
    cluster.taskctl("wait", "--timeout", "120", *ids, check=False)
    return by_name, ok, failed


def test_metrics_count_what_the_hub_records(make_cluster, tmp_path):
    cluster = make_cluster(engines=2, extra=("--hwm", "4"))
    by_name, ok, failed = run_graph(cluster, tmp_path)
    ids = list(by_name.values())
    records = cluster.records(ids)
    hub_ok = sum(r["status"] == "ok" for r in records)
    hub_failed = sum(r["status"] == "error" for r in records)
    assert (hub_ok, hub_failed) == (ok, failed)

    # waiting and ready are the scheduler's counts, sent once a second:
    # they may lag the hub's records by that much.
    def settled():
        m = metrics(cluster)
        idle = all(value(m, "ztask_tasks", state=s) == 0 for s in ("waiting", "ready", "running"))
        return m if value(m, "ztask_tasks", state="ok") == hub_ok and idle else None

    m = wait_until(settled, 30, "/metrics counting the graph, nothing left to run")
    assert value(m, "ztask_up") == 1
    assert value(m, "ztask_tasks", state="failed") == hub_failed
    assert value(m, "ztask_tasks_submitted_total") == len(ids)
    assert value(m, "ztask_tasks_finished_total", status="ok") == hub_ok
    assert value(m, "ztask_tasks_finished_total", status="failed") == hub_failed
    assert value(m, "ztask_task_retries_total") == 0
    assert value(m, "ztask_engines", state="running") == 2
    assert value(m, "ztask_queue_depth") == 0
    assert value(m, "ztask_clients") is not None
    # Tasks that never ran (ImpossibleDependency) have no duration.
    ran = sum(1 for r in records if r["started"])
    assert value(m, "ztask_task_duration_seconds_count") == ran
    assert value(m, "ztask_task_duration_seconds_bucket", le="+Inf") == ran
    assert value(m, "ztask_task_duration_seconds_sum") > 0
    for process in ("taskhub", "taskscheduler"):
        assert value(m, "ztask_dropped_messages_total", process=process) == 0, process
    assert value(m, "ztask_label_tasks_total", prefix="map", outcome="failed") == 5

    # A retried task counts its retries.
    task = cluster.taskctl("submit", "--retries", "2", "--", "false").stdout.strip()
    cluster.taskctl("wait", task, check=False)
    wait_until(lambda: value(metrics(cluster), "ztask_task_retries_total") == 2, 30,
               "two retries counted")


def test_the_api_answers_what_the_pages_show(make_cluster, tmp_path):
    cluster = make_cluster(engines=2)
    by_name, ok, failed = run_graph(cluster, tmp_path)
    ids = list(by_name.values())
    wait_until(lambda: cluster.json("/api/overview")["counts"].get("ok") == ok, 30, "the overview")
    overview = cluster.json("/api/overview")
    assert overview["counts"]["failed"] == failed
    assert overview["counts"]["scheme"] == "leastload"
    assert overview["engines_by_state"] == {"running": 2}
    ran = sum(1 for r in cluster.records(ids) if r["engine_id"] is not None)
    # Engines are asked about every second.
    wait_until(lambda: sum(e["done"] for e in cluster.json("/api/engines")) == ran, 30,
               "the engines' done counts")
    engines = cluster.json("/api/engines")
    assert sorted(e["id"] for e in engines) == [0, 1]
    # The default HWM is learned: each engine shows its own.
    assert overview["counts"]["hwm"] == -1
    wait_until(lambda: all(isinstance(e.get("hwm"), int) and e["hwm"] >= 1
                           for e in cluster.json("/api/engines")), 30, "each engine's HWM")
    labels = {l["prefix"]: l for l in cluster.json("/api/labels")}
    assert labels["map"] == {"prefix": "map", "submitted": 200, "ok": 195, "failed": 5}
    stream = cluster.json("/api/stream?after=0&limit=5000")
    assert len(stream) == len(ids)
    assert all(t["completed"] >= t["started"] for t in stream if t["started"])
    failures = cluster.json("/api/tasks?state=failed")
    assert len(failures) == failed and all(not t["ok"] for t in failures)
    assert len(cluster.json("/api/tasks?state=failed&label=map")) == 5
    assert cluster.json("/api/tasks?q=" + ids[0][:20])[0]["id"] == ids[0]
    detail = cluster.json("/api/task?id=" + by_name["map7"])
    assert detail["status"] == "error" and detail["error"]["type"] == "TaskFailed"
    final = cluster.json("/api/task?id=" + by_name["final"])
    assert len(final["after"]["ids"]) == 20 and final["error"]["type"] == "ImpossibleDependency"
    graph = cluster.json("/api/graph?id=" + by_name["final"])
    assert len(graph["nodes"]) == len(ids) and len(graph["edges"]) == 220
    assert not graph["truncated"]

    # Wrong questions get a clear answer, and nothing else changes.
    for path, status in (("/api/task?id=nothex", 400), ("/api/task?id=" + "0" * 32, 404),
                         ("/api/graph?id=", 400), ("/api/tasks?state=lost", 400),
                         ("/no/such/page", 404), ("/api/stream?after=x", 200)):
        got, body = cluster.get(path)
        assert got == status, (path, got, body)
        if status != 200:
            assert json.loads(body)["error"], path


def raw(cluster, data, read=True):
    host, port = cluster.base.split("//")[1].rstrip("/").split(":")
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(data)
    if read == "status":
        # Wait for the status line, so the server has taken the request in, then read no more.
        got = b""
        while b"\r\n" not in got:
            chunk = s.recv(1)
            assert chunk, "closed before a status line"
            got += chunk
        assert got.startswith(b"HTTP/1.1 200"), got
        return s
    if not read:
        return s
    chunks = []
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks):
                break
    except socket.timeout:
        pass
    s.close()
    return b"".join(chunks)


def test_hostile_clients_do_not_stop_it_serving(make_cluster):
    cluster = make_cluster(engines=1)
    assert raw(cluster, b"POST /api/overview HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").startswith(
        b"HTTP/1.1 405")
    assert b" 200 " not in raw(cluster, b"GET /" + b"a" * 200000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")[:20]
    raw(cluster, os.urandom(4096))
    raw(cluster, b"GET /api/task?id=" + b"%ff" * 1000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    # Readers of the event stream that stop reading after the status line, and requests
    # never finished.
    events = (b"GET /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
              cluster.token().encode() + b"\r\n\r\n")
    idle = [raw(cluster, events, read="status") for _ in range(16)]
    idle += [raw(cluster, b"GET /metr", read=False) for _ in range(4)]
    start = time.monotonic()
    status, _ = cluster.get("/metrics")
    assert status == 200 and time.monotonic() - start < 5
    # Past the streams it serves at once, a clear refusal.
    reply = raw(cluster, events)
    assert reply.startswith(b"HTTP/1.1 503"), reply[:80]
    for s in idle:
        s.close()
    wait_until(lambda: raw(cluster, events).startswith(b"HTTP/1.1 200"),
               30, "the event stream served again once the idle readers left")
    assert value(metrics(cluster), "ztask_up") == 1


def test_beyond_loopback_every_request_needs_the_token(make_cluster):
    cluster = make_cluster(engines=1, dashboard="0.0.0.0:0")
    token = cluster.url.split("token=", 1)[1]
    assert len(token) >= 32
    for path in ("/", "/metrics", "/api/overview", "/events", "/api/task?id=" + "0" * 32):
        assert cluster.get(path, token=False)[0] == 403, path
        assert cluster.get(path + ("&" if "?" in path else "?") + "token=" + "0" * len(token),
                           token=False)[0] == 403
    assert cluster.get("/metrics", {"Authorization": "Bearer " + token})[0] == 200
    assert cluster.get("/metrics", {"Cookie": "ztask_token=" + token})[0] == 200
    status, body = cluster.get("/?token=" + token)
    assert status == 200 and "<title>ztask dashboard</title>" in body


def test_on_loopback_too_every_request_needs_the_token(make_cluster):
    # Another account of this host can reach a loopback port: the task
    # details (a task's output, a Python task's result) are for the owner.
    cluster = make_cluster(engines=1)
    assert cluster.base.startswith("http://127.0.0.1:")
    token = cluster.token()
    assert len(token) >= 32
    for path in ("/", "/metrics", "/api/overview", "/api/tasks", "/events",
                 "/api/task?id=" + "0" * 32):
        assert cluster.get(path, token=False)[0] == 403, path
    status, body = cluster.get("/?token=" + token, token=False)
    assert status == 200 and "<title>ztask dashboard</title>" in body


def test_metrics_go_without_the_token_only_when_asked(make_cluster):
    cluster = make_cluster(engines=1)
    out = subprocess.Popen(
        [program("taskdash"), "--profile-dir", cluster.profile, "--port", "0",
         "--metrics-without-token"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = out.stdout.readline()
        assert line.startswith("taskdash: serving http://127.0.0.1:"), line
        url = line.split()[-1]
        assert "token=" in url
        base = url.split("?", 1)[0]

        def status(path):
            try:
                with urllib.request.urlopen(base + path, timeout=30) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code

        assert status("metrics") == 200
        assert status("api/overview") == 403
        assert status("") == 403
    finally:
        out.terminate()
        out.wait(30)


def test_a_killed_dashboard_comes_back_at_its_url(make_cluster):
    cluster = make_cluster(engines=1, dashboard="0.0.0.0:0")
    [pid] = children(cluster, "taskdash")
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: children(cluster, "taskdash") and children(cluster, "taskdash") != [pid], 30,
               "a new taskdash")

    def answers():
        try:
            return cluster.get("/metrics?token=" + cluster.url.split("token=", 1)[1])[0] == 200
        except OSError:
            return False

    wait_until(answers, 30, "the same URL answering again")


def test_it_follows_a_hub_that_restarts(make_cluster, tmp_path):
    cluster = make_cluster(engines=2)
    _, ok, failed = run_graph(cluster, tmp_path)
    wait_until(lambda: value(metrics(cluster), "ztask_tasks", state="ok") == ok, 30, "the counts")
    # The hub's process: the controller (the default layout), or taskhub.
    def hubs():
        return children(cluster, "taskcontroller") or children(cluster, "taskhub")

    [hub] = hubs()
    os.kill(hub, signal.SIGKILL)
    wait_until(lambda: hubs() and hubs() != [hub], 30,
               "a new hub")
    task = cluster.taskctl("submit", "--", "true").stdout.strip()
    cluster.taskctl("wait", task)
    # The records' counts survive (the file); the totals start again.
    wait_until(lambda: value(metrics(cluster), "ztask_tasks", state="ok") == ok + 1, 60,
               "the counts read again from the restarted hub")
    m = metrics(cluster)
    assert value(m, "ztask_up") == 1
    assert value(m, "ztask_tasks", state="failed") == failed
