"""What the peer benchmarks share: percentiles and the flags."""
import argparse


def percentile(values, fraction):
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def parse_args(with_hwm=False):
    parser = argparse.ArgumentParser()
    parser.add_argument("--engines", type=int, default=2)
    if with_hwm:
        parser.add_argument("--hwm", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--latency", type=int, default=500)
    parser.add_argument("--chain", type=int, default=500)
    return parser.parse_args()
