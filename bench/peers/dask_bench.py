"""The compare workloads on Dask distributed (Debian's python3-distributed).

Starts a LocalCluster of N worker processes with one thread each, runs no-op
throughput, one-at-a-time round trips, a chain of dependent tasks and a
fan-in, stops it, and prints one JSON line.

usage: /usr/bin/python3 dask_bench.py --engines 2 --tasks 2000
"""
import json
import os
import logging
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parse_args, percentile  # noqa: E402

from distributed import Client, LocalCluster, wait


# Defined here, in __main__, so that it travels by value to the workers.
def noop(*args):
    return None


def main():
    args = parse_args(with_hwm=False)

    with LocalCluster(n_workers=args.engines, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(args.engines)

        start = time.perf_counter()
        futures = [client.submit(noop, i, pure=False) for i in range(args.tasks)]
        wait(futures)
        throughput = args.tasks / (time.perf_counter() - start)
        del futures

        rtt = []
        for i in range(args.latency):
            t = time.perf_counter()
            client.submit(noop, i, pure=False).result()
            rtt.append((time.perf_counter() - t) * 1e6)

        chain_rate = fan_in_rate = 0
        if args.chain > 0:
            start = time.perf_counter()
            previous = client.submit(noop, pure=False)
            for _ in range(args.chain - 1):
                previous = client.submit(noop, previous, pure=False)
            previous.result()
            chain_rate = args.chain / (time.perf_counter() - start)

            start = time.perf_counter()
            parts = [client.submit(noop, i, pure=False) for i in range(args.tasks)]
            client.submit(noop, *parts, pure=False).result()
            fan_in_rate = (args.tasks + 1) / (time.perf_counter() - start)

    print(json.dumps({
        "system": "dask", "engines": args.engines, "tasks": args.tasks,
        "tasks_per_s": round(throughput, 1), "p50_us": round(percentile(rtt, 0.5)),
        "p99_us": round(percentile(rtt, 0.99)), "max_us": round(max(rtt, default=0)),
        "chain_tasks_per_s": round(chain_rate, 1), "fan_in_tasks_per_s": round(fan_in_rate, 1),
    }))


if __name__ == "__main__":
    sys.exit(main())
