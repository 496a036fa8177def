"""What the dashboard costs: the no-op workload (e2e_bench --attach) in a
cluster without a dashboard, then in one with taskdash and a headless
Chromium showing its task stream, in turns, several rounds; medians and
the CPU each process used per task. With --screenshot FILE, the task
stream is saved mid-workload. Prints one JSON line last."""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except OSError:
        return 0.0


def processes():
    """(pid, parent, name) of every process."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    head, rest = f.read().rsplit(")", 1)
                out.append((int(entry), int(rest.split()[1]), head.split("(", 1)[1]))
            except OSError:
                pass
    return out


def tree(root):
    """Pids of root and everything under it."""
    all_ = processes()
    found, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid, _ in all_:
            if ppid == parent and pid not in found:
                found.add(pid)
                frontier.append(pid)
    return found


def child(cluster_pid, *names):
    """The supervisor's child running the first of `names` there is."""
    children = {comm: pid for pid, ppid, comm in processes() if ppid == cluster_pid}
    return next(children[name] for name in names if name in children)


def start(bin_dir, profile, engines, hwm, dashboard):
    command = [os.path.join(bin_dir, "taskcluster"), "start", "-n", str(engines), "--hwm", str(hwm),
               "--daemonize", "--profile-dir", profile]
    if dashboard:
        command += ["--dashboard", "0"]
    out = subprocess.run(command, check=True, capture_output=True, text=True, timeout=120).stdout
    with open(os.path.join(profile, "cluster.pid")) as f:
        pid = int(f.read())
    url = next((l.split(" ", 1)[1] for l in out.splitlines() if l.startswith("dashboard: ")), None)
    return pid, url


def stop(bin_dir, profile):
    subprocess.run([os.path.join(bin_dir, "taskcluster"), "stop", "--profile-dir", profile],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def browser_on(url):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = Options()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,900"):
        options.add_argument(arg)
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(service=service, options=options)
    driver.get(url.split("#")[0] + "#stream")
    deadline = time.monotonic() + 30
    while "live" not in driver.find_element(By.ID, "status").text:
        if time.monotonic() > deadline:
            raise RuntimeError("the dashboard page did not go live")
        time.sleep(0.1)
    return driver, service.process.pid


def settle(root, deadline_s=30.0, window_s=0.5, busy=0.05):
    """Waits until the browser has done loading the page: a window in which
    its processes used under `busy` of a core (an open page's own pace)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        before = {p: cpu_seconds(p) for p in tree(root)}
        time.sleep(window_s)
        after = {p: cpu_seconds(p) for p in tree(root)}
        if set(before) != set(after):
            continue  # a process came or went: a page still busy
        if sum(after[p] - before[p] for p in after) < busy * window_s:
            return
    raise RuntimeError("the dashboard page did not settle within %.0f s" % deadline_s)


def one_run(args, with_dashboard, shot):
    profile = tempfile.mkdtemp(prefix="ztask-dash-bench-")
    driver = None
    try:
        cluster, url = start(args.bin, profile, args.engines, args.hwm, with_dashboard)
        # The hub's process: the controller (the default layout), or taskhub.
        hub = child(cluster, "taskcontroller", "taskhub")
        watched = {"hub": [hub]}
        if with_dashboard:
            driver, driver_pid = browser_on(url)
            settle(driver_pid)  # what is measured is an open page, not one loading
            watched["taskdash"] = [child(cluster, "taskdash")]
            watched["browser"] = sorted(tree(driver_pid))
        before = {k: sum(cpu_seconds(p) for p in pids) for k, pids in watched.items()}
        bench = subprocess.Popen([os.path.join(args.bin, "e2e_bench"), "--attach", profile, "--tasks",
                                  str(args.tasks), "--latency", "0"], stdout=subprocess.PIPE, text=True)
        if shot and driver:
            time.sleep(args.shot_after)
            driver.save_screenshot(shot)
        out, _ = bench.communicate(timeout=600)
        if bench.returncode != 0:
            raise RuntimeError("e2e_bench --attach failed")
        if with_dashboard:  # the browser's processes may have changed
            watched["browser"] = sorted(tree(driver_pid))
        after = {k: sum(cpu_seconds(p) for p in pids) for k, pids in watched.items()}
        result = json.loads(out.strip().splitlines()[-1])
        cpu = {k: (after[k] - before[k]) / args.tasks * 1e6 for k in watched}
        return result["tasks_per_s"], cpu
    finally:
        if driver:
            driver.quit()
        stop(args.bin, profile)
        shutil.rmtree(profile, ignore_errors=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--engines", type=int, default=2)
    p.add_argument("--hwm", type=int, default=64)
    p.add_argument("--tasks", type=int, default=200000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--screenshot")
    p.add_argument("--shot-after", type=float, default=1.5)
    args = p.parse_args()
    without, with_, cpu_without, cpu_with = [], [], [], []
    for k in range(args.rounds):
        rate, cpu = one_run(args, False, None)
        without.append(rate)
        cpu_without.append(cpu)
        rate, cpu = one_run(args, True, args.screenshot if k == 0 else None)
        with_.append(rate)
        cpu_with.append(cpu)
        print("  round %d: %.0f/s without, %.0f/s with the dashboard open" % (k + 1, without[-1], with_[-1]),
              file=sys.stderr)

    def median(rows, key):
        return statistics.median(r[key] for r in rows)

    print(json.dumps({
        "label": "dashboard", "engines": args.engines, "hwm": args.hwm, "tasks": args.tasks,
        "rounds": args.rounds,
        "tasks_per_s_without": statistics.median(without),
        "tasks_per_s_with": statistics.median(with_),
        "ratio": statistics.median(with_) / statistics.median(without),
        "hub_cpu_us_per_task_without": median(cpu_without, "hub"),
        "hub_cpu_us_per_task_with": median(cpu_with, "hub"),
        "taskdash_cpu_us_per_task": median(cpu_with, "taskdash"),
        "browser_cpu_us_per_task": median(cpu_with, "browser"),
    }))


if __name__ == "__main__":
    main()
