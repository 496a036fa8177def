"""ztask's Python client on the compare workloads.

Starts a cluster (taskcluster of the given build, leastload, the given HWM)
in a temporary profile, then from one Python client: trivial Python
function tasks (the same `noop` the peers run), the engines' built-in
`noop` by name, and one-at-a-time round trips of each; and the C++
client's round trips in the same cluster (e2e_bench --attach), the
reference for the Python client's. Stops the cluster and prints one JSON
line.

usage: /usr/bin/python3 ztask_python_bench.py --bin build-release/bin --engines 2 --hwm 64 --tasks 20000
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from common import percentile  # noqa: E402

import ztask  # noqa: E402


# Defined here, in __main__, so that it travels by value to the engines.
def noop(*args):
    return None


def rate(n, seconds):
    return round(n / seconds, 1) if seconds > 0 else 0


def round_trips(make, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        make().result()
        out.append((time.perf_counter() - t) * 1e6)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(HERE, "..", "..", "build-release", "bin"))
    parser.add_argument("--engines", type=int, default=2)
    parser.add_argument("--hwm", default="64", help="a number, or auto (the default of taskcluster)")
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--latency", type=int, default=1000)
    args = parser.parse_args()
    cluster = os.path.join(args.bin, "taskcluster")
    with tempfile.TemporaryDirectory(prefix="ztask-python-bench-") as profile:
        subprocess.run([cluster, "start", "-n", str(args.engines), "--hwm", str(args.hwm), "--daemonize",
                        "--profile-dir", profile], check=True, stdout=subprocess.DEVNULL, timeout=120)
        try:
            client = ztask.Client(profile)
            client.wait_for_engines(args.engines, 60)
            # Each engine's Python worker started, as a peer's engines are.
            client.gather([client.submit(noop, targets=e) for e in client.ids])

            start = time.perf_counter()
            client.gather([client.submit(noop) for _ in range(args.tasks)])
            function_rate = rate(args.tasks, time.perf_counter() - start)

            start = time.perf_counter()
            client.gather([client.call("noop") for _ in range(args.tasks)])
            call_rate = rate(args.tasks, time.perf_counter() - start)

            function_rtt = round_trips(lambda: client.submit(noop), args.latency)
            call_rtt = round_trips(lambda: client.call("noop"), args.latency)
            client.close()
            cpp = subprocess.run([os.path.join(args.bin, "e2e_bench"), "--attach", profile, "--latency",
                                  str(args.latency)], check=True, capture_output=True, text=True, timeout=300)
            cpp_rtt = json.loads(cpp.stdout.strip().splitlines()[-1])
        finally:
            subprocess.run([cluster, "stop", "--profile-dir", profile], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120)
    print(json.dumps({
        "system": "ztask_python", "engines": args.engines, "hwm": args.hwm, "tasks": args.tasks,
        "function_tasks_per_s": function_rate, "call_tasks_per_s": call_rate,
        "function_p50_us": round(percentile(function_rtt, 0.5)),
        "function_p99_us": round(percentile(function_rtt, 0.99)),
        "call_p50_us": round(percentile(call_rtt, 0.5)), "call_p99_us": round(percentile(call_rtt, 0.99)),
        "cpp_p50_us": cpp_rtt["p50_us"], "cpp_p99_us": cpp_rtt["p99_us"],
    }))


if __name__ == "__main__":
    sys.exit(main())
