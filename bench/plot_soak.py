#!/usr/bin/python3
"""Draws a soak's CSV (bench/soak.sh): every process's resident memory, the
database's size and the throughput against the tasks answered.

usage: plot_soak.py SOAK.csv OUT.png [TITLE]
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after the back end is chosen)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit("plot_soak.py: no rows in " + sys.argv[1])
    millions = [int(r["tasks"]) / 1e6 for r in rows]
    mib = lambda key: [int(r[key]) / 2**20 for r in rows]  # noqa: E731
    fig, (memory, rate) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for key, name in [("hub_rss", "hub"), ("scheduler_rss", "scheduler"),
                      ("engine_rss", "engine (largest)"), ("client_rss", "client"),
                      ("db_bytes", "database file + WAL")]:
        memory.plot(millions, mib(key), marker="o", label=name)
    memory.set_ylabel("MiB (resident; database on disk)")
    memory.set_ylim(bottom=0)
    memory.legend(fontsize="small", ncol=2)
    memory.grid(alpha=0.3)
    rate.plot(millions, [float(r["tasks_per_s"]) / 1e3 for r in rows], marker="o", color="black")
    rate.set_ylabel("thousand tasks/s (since the sample before)")
    rate.set_xlabel("million tasks answered")
    rate.set_ylim(bottom=0)
    rate.grid(alpha=0.3)
    if len(sys.argv) > 3:
        fig.suptitle(sys.argv[3], fontsize="medium")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=80)


if __name__ == "__main__":
    main()
