"""Combines compare.sh's JSON lines into one table and one JSON object.

usage: combine.py DIR ENGINES HWM   (DIR holds NAME.json files, one line each)
"""
import json
import os
import sys


def load(directory, name):
    path = os.path.join(directory, name + ".json")
    try:
        with open(path) as f:
            return json.loads(f.read().strip() or "{}")
    except (OSError, ValueError):
        return {}


def median_of(runs):
    """Each numeric key's median over the runs that have it."""
    out = {}
    for key in set().union(*runs):
        values = sorted(r[key] for r in runs if isinstance(r.get(key), (int, float))
                        and not isinstance(r.get(key), bool))
        out[key] = values[len(values) // 2] if values else runs[0].get(key)
    return out


def ratio(a, b):
    return a / b if a and b else 0.0


def main():
    directory, engines, hwm = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    runs = [r for r in (load(directory, f"ztask_{k}") for k in (1, 2, 3)) if r]
    z = median_of(runs) if runs else {}
    z1 = load(directory, "ztask_hwm1")
    zm = load(directory, "ztask_memory")
    zw = load(directory, "ztask_waiting")
    zc = load(directory, "ztask_curve")
    zp = load(directory, "ztask_power")
    # The simulated pools: medians of their runs, and each ratio the median
    # of the pairs' (each pair ran in turn, under the same load).
    pairs = [(load(directory, f"ztask_sim2_{k}"), load(directory, f"ztask_sim10000_{k}"))
             for k in range(1, 6)]
    pairs = [(a, b) for a, b in pairs if a and b]
    s2 = median_of([a for a, _ in pairs]) if pairs else {}
    s10k = median_of([b for _, b in pairs]) if pairs else {}

    def pair_ratio(key):
        values = sorted(ratio(b.get(key), a.get(key)) for a, b in pairs)
        return values[len(values) // 2] if values else 0.0
    i1 = load(directory, "ipyparallel_hwm1")
    ih = load(directory, "ipyparallel_hwm")
    d = load(directory, "dask")
    zpy = load(directory, "ztask_python")
    dash = load(directory, "dashboard")
    ipp_best = max(i1.get("tasks_per_s", 0), ih.get("tasks_per_s", 0))

    rows = [
        ("no-op throughput, tasks/s", z.get("tasks_per_s"), z.get("relay_tasks_per_s"),
         ipp_best, d.get("tasks_per_s")),
        ("floor at 64 tasks a message, tasks/s", None, z.get("relay64_tasks_per_s"), None, None),
        ("no-op throughput, HWM 1, tasks/s", z1.get("tasks_per_s"), None,
         i1.get("tasks_per_s"), None),
        ("round trip p50, us", z.get("p50_us"), z.get("relay_p50_us"), i1.get("p50_us"),
         d.get("p50_us")),
        ("round trip p99, us", z.get("p99_us"), None, i1.get("p99_us"), d.get("p99_us")),
        ("chain, tasks/s", z.get("chain_tasks_per_s"), None, i1.get("chain_tasks_per_s"),
         d.get("chain_tasks_per_s")),
        ("fan-in, tasks/s", z.get("fan_in_tasks_per_s"), None, i1.get("fan_in_tasks_per_s"),
         d.get("fan_in_tasks_per_s")),
        ("random DAG, tasks/s", z.get("dag_tasks_per_s"), None, None, None),
        ("Python function no-op, tasks/s", zpy.get("function_tasks_per_s"), None, ipp_best,
         d.get("tasks_per_s")),
        ("Python client, engine noop, tasks/s", zpy.get("call_tasks_per_s"), None, None, None),
        ("Python round trip p50, us", zpy.get("call_p50_us"), None, None, None),
        ("C++ round trip p50 there, us", zpy.get("cpp_p50_us"), None, None, None),
        ("Python function round trip p50, us", zpy.get("function_p50_us"), None, i1.get("p50_us"),
         d.get("p50_us")),
    ]
    print(f"{engines} engines each; ztask: leastload, HWM {hwm}, signed, SQLite "
          f"({z.get('tasks')} tasks; medians of {len(runs)} runs, each with its floor); "
          f"peers: {i1.get('tasks')} tasks")
    print(f"{'figure':36} {'ztask':>10} {'floor':>10} {'IPyParallel':>12} {'Dask':>10}")

    def cell(v, width):
        return f"{'-' if v in (None, 0) else round(v):>{width}}"

    for name, a, b, c, e in rows:
        print(f"{name:36} {cell(a, 10)} {cell(b, 10)} {cell(c, 12)} {cell(e, 10)}")
    print()
    print(f"ztask / floor throughput:        {ratio(z.get('tasks_per_s'), z.get('relay_tasks_per_s')):.3f} "
          f"(one task a message), {ratio(z.get('tasks_per_s'), z.get('relay64_tasks_per_s')):.3f} "
          f"(64 a message)")
    print(f"ztask p50 / floor p50:           {ratio(z.get('p50_us'), z.get('relay_p50_us')):.2f}")
    print(f"ztask / IPython Parallel:        {ratio(z.get('tasks_per_s'), ipp_best):.0f}x "
          f"(IPython Parallel's better of HWM 1 and HWM {hwm})")
    print(f"ztask / Dask:                    {ratio(z.get('tasks_per_s'), d.get('tasks_per_s')):.0f}x")
    print(f"Python functions / IPyParallel:  "
          f"{ratio(zpy.get('function_tasks_per_s'), ipp_best):.0f}x, / Dask "
          f"{ratio(zpy.get('function_tasks_per_s'), d.get('tasks_per_s')):.0f}x "
          f"(the same no-op function, from Python)")
    print(f"Python / C++ round trip p50:     {ratio(zpy.get('call_p50_us'), zpy.get('cpp_p50_us')):.2f} "
          f"(the engines' noop, one at a time, both clients in the same cluster)")
    print(f"dashboard open / closed:         {dash.get('ratio', 0):.2f} "
          f"({dash.get('tasks_per_s_with', 0):.0f} vs {dash.get('tasks_per_s_without', 0):.0f} tasks/s; "
          f"hub {dash.get('hub_cpu_us_per_task_with', 0):.1f} vs {dash.get('hub_cpu_us_per_task_without', 0):.1f} "
          f"us/task, taskdash {dash.get('taskdash_cpu_us_per_task', 0):.2f}, "
          f"browser {dash.get('browser_cpu_us_per_task', 0):.1f})")
    print(f"fan-in / no-op throughput:       {ratio(z.get('fan_in_tasks_per_s'), z.get('tasks_per_s')):.2f}")
    print(f"10000 / {engines} simulated engines:     "
          f"no-ops {pair_ratio('tasks_per_s'):.2f} "
          f"({s10k.get('tasks_per_s', 0):.0f} vs {s2.get('tasks_per_s', 0):.0f} tasks/s), "
          f"chain {pair_ratio('chain_tasks_per_s'):.2f} "
          f"({s10k.get('chain_tasks_per_s', 0):.0f} vs {s2.get('chain_tasks_per_s', 0):.0f}); "
          f"registered in {s10k.get('register_s', 0):.1f} s; idle: hub "
          f"{s10k.get('idle_hub_ms_per_s', 0):.0f} ms/s, scheduler "
          f"{s10k.get('idle_scheduler_ms_per_s', 0):.0f} ms/s; per engine: hub "
          f"{s10k.get('hub_bytes_per_engine', 0) / 1024:.0f} KiB, scheduler "
          f"{s10k.get('scheduler_bytes_per_engine', 0) / 1024:.0f} KiB")
    print(f"hub SQLite / :memory:            {ratio(z.get('tasks_per_s'), zm.get('tasks_per_s')):.2f} "
          f"({zm.get('tasks_per_s', 0):.0f} tasks/s in memory)")
    print(f"CURVE / signed only:             {ratio(zc.get('tasks_per_s'), z.get('tasks_per_s')):.2f} "
          f"({zc.get('tasks_per_s', 0):.0f} tasks/s, round trip p50 {zc.get('p50_us', 0):.0f} us)")
    print(f"durability power / process:      {ratio(zp.get('tasks_per_s'), z.get('tasks_per_s')):.2f} "
          f"({zp.get('tasks_per_s', 0):.0f} tasks/s, round trip p50 {zp.get('p50_us', 0):.0f} us)")
    separate_runs = [r for r in (load(directory, f"ztask_separate_{k}") for k in (1, 2, 3)) if r]
    zs = median_of(separate_runs) if separate_runs else {}
    print(f"hub memory per recorded task:    {zs.get('hub_bytes_per_record', 0):.0f} bytes (taskhub; "
          f"the hub and the scheduler in one process: {z.get('hub_bytes_per_record', 0):.0f})")
    print(f"scheduler memory per waiting task: {zw.get('scheduler_bytes_per_waiting', 0):.0f} bytes "
          f"each more, {zw.get('scheduler_bytes_per_waiting_all', 0):.0f} in all "
          f"({zw.get('waiting', 0)} waiting)")
    retried = []
    try:
        with open(os.path.join(directory, "retried")) as f:
            retried = [line.strip() for line in f if line.strip()]
    except OSError:
        pass
    print("runs that failed once and were run again: " + (", ".join(retried) or "none"))
    za = load(directory, "ztask_auto")
    zpya = load(directory, "ztask_python_auto")
    defaults = {
        "auto_tasks_per_s": za.get("tasks_per_s", 0),
        "auto_vs_hwm64": ratio(za.get("tasks_per_s"), z.get("tasks_per_s")),
        "python_function_auto_tasks_per_s": zpya.get("function_tasks_per_s", 0),
        "python_auto_vs_hwm64": ratio(zpya.get("function_tasks_per_s"),
                                      zpy.get("function_tasks_per_s")),
    }
    print(f"defaults (HWM auto) / HWM {hwm}:   C++ no-ops {defaults['auto_vs_hwm64']:.2f} "
          f"({defaults['auto_tasks_per_s']:.0f} tasks/s), Python function no-ops "
          f"{defaults['python_auto_vs_hwm64']:.2f} "
          f"({defaults['python_function_auto_tasks_per_s']:.0f} tasks/s)")
    for shape in ("mixed", "spikes", "slowdown"):
        s = {h: load(directory, f"shape_{shape}_{h}").get("shape_s", 0) for h in ("auto", "1", "64")}
        best = min((v for v in (s["1"], s["64"]) if v), default=0)
        defaults[f"{shape}_s"] = {f"hwm_{h}": v for h, v in s.items()}
        defaults[f"{shape}_auto_vs_best"] = ratio(s["auto"], best)
        print(f"shape {shape + ':':10}                 auto {s['auto']:.3f} s, HWM 1 {s['1']:.3f} s, "
              f"HWM 64 {s['64']:.3f} s: auto / better fixed {ratio(s['auto'], best):.3f}")
    cpu = median_of([r["cpu_us_per_task"] for r in runs if isinstance(r.get("cpu_us_per_task"), dict)]
                    or [{}])
    if cpu:
        print("CPU per no-op, us:               " +
              ", ".join(f"{k} {cpu.get(k, 0):.1f}"
                        for k in ("hub", "scheduler", "engines", "client", "all")))
    # The hub and the scheduler in their own processes, beside the main runs
    # (which have them in one, taskcluster's default).
    zs_cpu = median_of([r["cpu_us_per_task"] for r in separate_runs
                        if isinstance(r.get("cpu_us_per_task"), dict)] or [{}])
    separate = {
        "tasks_per_s": zs.get("tasks_per_s", 0),
        "controller_over_separate": round(ratio(z.get("tasks_per_s"), zs.get("tasks_per_s")), 3),
        "p50_us": zs.get("p50_us", 0),
        "p99_us": zs.get("p99_us", 0),
        "chain_tasks_per_s": zs.get("chain_tasks_per_s", 0),
        "cpu_us_per_task": zs_cpu,
    }
    print(f"controller / separate:           {separate['controller_over_separate']:.2f} "
          f"(separate {separate['tasks_per_s']:.0f} tasks/s, round trip p50 {separate['p50_us']:.0f} us, "
          f"CPU {cpu.get('all', 0):.1f} vs {zs_cpu.get('all', 0):.1f} us per no-op)")
    summary = {
        "engines": engines,
        "ztask_tasks_per_s": z.get("tasks_per_s", 0),
        "ipyparallel_tasks_per_s": ipp_best,
        "ipyparallel_hwm1_tasks_per_s": i1.get("tasks_per_s", 0),
        "dask_tasks_per_s": d.get("tasks_per_s", 0),
        "relay_tasks_per_s": z.get("relay_tasks_per_s", 0),
        "relay64_tasks_per_s": z.get("relay64_tasks_per_s", 0),
        "ztask_hwm": hwm,
        "ztask_hwm1_tasks_per_s": z1.get("tasks_per_s", 0),
        "ztask_p50_us": z.get("p50_us", 0),
        "ztask_p99_us": z.get("p99_us", 0),
        "relay_p50_us": z.get("relay_p50_us", 0),
        "ipyparallel_p50_us": i1.get("p50_us", 0),
        "dask_p50_us": d.get("p50_us", 0),
        "ztask_chain_tasks_per_s": z.get("chain_tasks_per_s", 0),
        "ztask_fan_in_tasks_per_s": z.get("fan_in_tasks_per_s", 0),
        "ztask_dag_tasks_per_s": z.get("dag_tasks_per_s", 0),
        "ztask_memory_db_tasks_per_s": zm.get("tasks_per_s", 0),
        "ztask_curve_tasks_per_s": zc.get("tasks_per_s", 0),
        "ztask_curve_p50_us": zc.get("p50_us", 0),
        "ztask_power_tasks_per_s": zp.get("tasks_per_s", 0),
        "ztask_power_p50_us": zp.get("p50_us", 0),
        "ztask_sim2_tasks_per_s": s2.get("tasks_per_s", 0),
        "ztask_sim10000_tasks_per_s": s10k.get("tasks_per_s", 0),
        "ztask_sim2_chain_tasks_per_s": s2.get("chain_tasks_per_s", 0),
        "ztask_sim10000_chain_tasks_per_s": s10k.get("chain_tasks_per_s", 0),
        "ztask_sim10000_over_sim2_tasks": round(pair_ratio("tasks_per_s"), 3),
        "ztask_sim10000_over_sim2_chain": round(pair_ratio("chain_tasks_per_s"), 3),
        "ztask_sim10000_register_s": s10k.get("register_s", 0),
        "ztask_sim10000_idle_hub_ms_per_s": s10k.get("idle_hub_ms_per_s", 0),
        "ztask_sim10000_idle_scheduler_ms_per_s": s10k.get("idle_scheduler_ms_per_s", 0),
        "ztask_sim10000_hub_bytes_per_engine": s10k.get("hub_bytes_per_engine", 0),
        "ztask_sim10000_scheduler_bytes_per_engine": s10k.get("scheduler_bytes_per_engine", 0),
        # The hub's own memory a record (the separate layout's taskhub), and
        # the one process's of the default layout (the hub and the scheduler).
        "hub_bytes_per_record": zs.get("hub_bytes_per_record", 0),
        "controller_bytes_per_record": z.get("hub_bytes_per_record", 0),
        "scheduler_bytes_per_waiting": zw.get("scheduler_bytes_per_waiting", 0),
        "scheduler_bytes_per_waiting_all": zw.get("scheduler_bytes_per_waiting_all", 0),
        "ztask_cpu_us_per_task": cpu,
        "python_function_tasks_per_s": zpy.get("function_tasks_per_s", 0),
        "python_call_tasks_per_s": zpy.get("call_tasks_per_s", 0),
        "python_p50_us": zpy.get("call_p50_us", 0),
        "python_function_p50_us": zpy.get("function_p50_us", 0),
        "python_cpp_p50_us": zpy.get("cpp_p50_us", 0),
        "dashboard_ratio": dash.get("ratio", 0),
        "dashboard_hub_cpu_us_per_task": dash.get("hub_cpu_us_per_task_with", 0),
        "retried": retried,
        "defaults": defaults,
        "separate": separate,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
