"""Pairs `offtrace monitor --format csv` NVML rows with `nvidia-smi --query-gpu ... -lms` rows
sampled at the same time (nearest in time, within half a period) and prints per metric the
mean absolute and relative difference. Usage: compare_nvml_smi.py monitor.csv smi.csv workload.log"""
import csv
import sys
from datetime import datetime

mon_path, smi_path, log_path = sys.argv[1:4]
offset = None
phases = []
for line in open(log_path):
    p = line.split()
    if p and p[0] == "clock_offset_ns":
        offset = int(p[1])
    if p and p[0] == "phase":
        phases.append((p[1], int(p[2]), int(p[3])))
assert offset is not None, "no clock_offset_ns line"

# offtrace rows: ts_ns (monotonic), device, group, metric, value, unit
mon = {}
for r in csv.DictReader(open(mon_path)):
    if r["group"] != "nvml.telemetry":
        continue
    mon.setdefault(int(r["ts_ns"]), {})[r["metric"]] = float(r["value"])
mon_ts = sorted(mon)

want = {  # smi column (without its unit) -> (offtrace metric, scale to smi units)
    "power.draw": ("power", 1.0),
    "power.draw.average": ("power", 1.0),
    "power.draw.instant": ("power", 1.0),
    "clocks.current.sm": ("sm_clock", 1.0),
    "clocks.sm": ("sm_clock", 1.0),
    "clocks.current.memory": ("memory_clock", 1.0),
    "clocks.mem": ("memory_clock", 1.0),
    "temperature.gpu": ("temperature", 1.0),
    "utilization.gpu": ("utilization", 1.0),
    "utilization.memory": ("memory_utilization", 1.0),
    "memory.used": ("memory_used", 1.0 / (1 << 20)),
}
rows = list(csv.reader(open(smi_path)))
head = [h.strip() for h in rows[0]]
pairs = {h: want[h.split(" [")[0]] for h in head if h.split(" [")[0] in want}
diffs = {k: [] for k in pairs}
steady = {k: [] for k in pairs}
bounds = [t for _, a, b in phases for t in (a, b)]
import bisect
period = 200_000_000
for r in rows[1:]:
    if len(r) != len(head):
        continue
    d = dict(zip(head, (c.strip() for c in r)))
    wall = datetime.strptime(d["timestamp"], "%Y/%m/%d %H:%M:%S.%f").timestamp()
    t = int(wall * 1e9) - offset
    i = bisect.bisect_left(mon_ts, t)
    best = min((c for c in (i - 1, i) if 0 <= c < len(mon_ts)), key=lambda c: abs(mon_ts[c] - t), default=None)
    if best is None or abs(mon_ts[best] - t) > period // 2:
        continue
    m = mon[mon_ts[best]]
    for col, (metric, scale) in pairs.items():
        if col in d and metric in m:
            try:
                pair = (float(d[col]), m[metric] * scale)
            except ValueError:
                continue
            diffs[col].append(pair)
            # Steady: both samples at least 500 ms from a phase boundary (values move fast there).
            if all(abs(t - b) > 500_000_000 and abs(mon_ts[best] - b) > 500_000_000 for b in bounds):
                steady[col].append(pair)
for title, table in (("all pairs", diffs), ("steady pairs (>= 500 ms from a phase change)", steady)):
    print(title)
    print(f"{'metric':30} {'pairs':>5} {'smi mean':>10} {'offtrace mean':>13} {'mean |diff|':>11} {'rel':>7}")
    for col, v in table.items():
        if not v:
            print(f"{col:30} {0:>5}")
            continue
        s = sum(a for a, _ in v) / len(v)
        o = sum(b for _, b in v) / len(v)
        md = sum(abs(a - b) for a, b in v) / len(v)
        rel = md / s * 100 if s else 0.0
        print(f"{col:30} {len(v):>5} {s:>10.1f} {o:>13.1f} {md:>11.2f} {rel:>6.2f}%")
for name, t0, t1 in phases:
    sel = [mon[t] for t in mon_ts if t0 <= t <= t1]
    if sel:
        u = sum(x.get("utilization", 0) for x in sel) / len(sel)
        p = sum(x.get("power", 0) for x in sel) / len(sel)
        print(f"phase {name:7} {len(sel):3} samples: offtrace utilization {u:5.1f} %, power {p:6.1f} W")
