#!/usr/bin/env python3
"""Checks one `offtrace record --query-metrics cupti.range_profiler` run (scripts/metrics/rangeq_run.sh):
the report's command_metrics rows, its kernels against a control recording of the same program,
the per-range log (OFFTRACE_RANGEQ_LOG: batches, ranges, the correlation each was emitted with).

  rangeq_check.py REPORT.json CONTROL_REPORT.json RANGES_LOG [OURS_CSV]

OURS_CSV: the ranges written as compare_cupti_ncu.py's input (kernel,launch,range,metrics...; the
kernel is the launch each range was paired with),
without the first two ranges (cupti_kernels' warm-up launches)."""
import json, sys


def kernels(report):
    return {(a["name"]): (a["count"], a["device_count"]) for a in report.get("device_activity", [])
            if a["kind"] == "KERNEL_DISPATCH"}


def main():
    rep = json.load(open(sys.argv[1]))
    ctl = json.load(open(sys.argv[2]))
    rows = rep.get("command_metrics", [])
    print(f"command_metrics rows: {len(rows)}")
    for x in rows:
        print(f'  {x["kind"]:16} {x["name"][:36]:36} {x["metric"][21:]:66} n={x["commands"]:4} '
              f'mean={x["mean"]:.6g} min={x["min"]:.6g} max={x["max"]:.6g} {x["unit"]}')
    a, b = kernels(rep), kernels(ctl)
    values = {}
    for x in rows:
        if x["kind"] == "KERNEL_DISPATCH":
            values[x["name"]] = max(values.get(x["name"], 0), x["commands"])
    print("kernels: (count, with device times) recorded with the range profiler, with values | control")
    for name in sorted(set(a) | set(b)):
        print(f"  {name[:60]:60} {str(a.get(name)):>12} {values.get(name, 0):5} | {str(b.get(name)):>12}")
    print(f"kernel launches with values / recorded: {sum(values.values())} / {sum(c for c, _ in a.values())}")
    ranges = []
    for line in open(sys.argv[3]):
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            print("log", line)
            continue
        f = line.split(",")
        if f[0] == "batch":
            header = f
            continue
        ranges.append(f)
    print(f"ranges decoded: {len(ranges)}, emitted with a correlation: {sum(1 for r in ranges if r[4] != '0')}")
    if len(sys.argv) > 4:
        with open(sys.argv[4], "w") as out:
            out.write("kernel,launch,range," + ",".join(header[5:]) + "\n")
            for i, r in enumerate(ranges[2:]):
                out.write(f"{r[3]},{i},{r[2]}," + ",".join(r[5:]) + "\n")


if __name__ == "__main__":
    main()
