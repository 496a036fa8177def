"""The compare workloads on IPython Parallel (Debian's python3-ipyparallel).

Starts ipcontroller (leastload scheme, the given HWM) and N engines in a
temporary profile, runs no-op throughput, one-at-a-time round trips, a chain
of dependent tasks and a fan-in, stops everything, and prints one JSON line.

usage: /usr/bin/python3 ipyparallel_bench.py --engines 2 --hwm 1 --tasks 2000
"""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parse_args, percentile  # noqa: E402

import ipyparallel as ipp


# Defined here, in __main__, so that it travels by value to the workers.
def noop(*args):
    return None


def main():
    args = parse_args(with_hwm=True)

    with tempfile.TemporaryDirectory(prefix="ztask-peer-ipp-") as profile:
        cluster = ipp.Cluster(
            n=args.engines,
            profile_dir=profile,
            controller_args=["--scheme=leastload", f"--hwm={args.hwm}", "--log-level=WARN"],
            log_level=40,
        )
        client = cluster.start_and_connect_sync()
        try:
            client.wait_for_engines(args.engines, timeout=120)
            view = client.load_balanced_view()

            start = time.perf_counter()
            results = [view.apply_async(noop) for _ in range(args.tasks)]
            for r in results:
                r.get()
            throughput = args.tasks / (time.perf_counter() - start)

            rtt = []
            for _ in range(args.latency):
                t = time.perf_counter()
                view.apply_async(noop).get()
                rtt.append((time.perf_counter() - t) * 1e6)

            chain_rate = fan_in_rate = 0
            if args.chain > 0:
                start = time.perf_counter()
                previous = None
                for _ in range(args.chain):
                    with view.temp_flags(after=[previous] if previous is not None else []):
                        previous = view.apply_async(noop)
                previous.get()
                chain_rate = args.chain / (time.perf_counter() - start)

                start = time.perf_counter()
                parts = [view.apply_async(noop) for _ in range(args.tasks)]
                with view.temp_flags(after=parts):
                    view.apply_async(noop).get()
                fan_in_rate = (args.tasks + 1) / (time.perf_counter() - start)
        finally:
            client.close()
            cluster.stop_cluster_sync()

    print(json.dumps({
        "system": "ipyparallel", "engines": args.engines, "hwm": args.hwm, "tasks": args.tasks,
        "tasks_per_s": round(throughput, 1), "p50_us": round(percentile(rtt, 0.5)),
        "p99_us": round(percentile(rtt, 0.99)), "max_us": round(max(rtt, default=0)),
        "chain_tasks_per_s": round(chain_rate, 1), "fan_in_tasks_per_s": round(fan_in_rate, 1),
    }))


if __name__ == "__main__":
    sys.exit(main())
