#!/usr/bin/env python3
"""offtrace's CUPTI range-profiler values per kernel (cupti_kernels range) vs ncu --metrics on
the same kernels (cupti_kernels plain, --print-units base); or, with --pm, PM sampling's
reports averaged over each phase of cupti_kernels pm."""
import csv, statistics, sys


def ours(path):
    rows = [r for r in csv.reader(open(path)) if r]
    names = rows[0][3:]  # kernel, launch, CUPTI's range name, metrics...
    per = {}
    for r in rows[1:]:
        per.setdefault(r[0], []).append([float(x) for x in r[3:]])
    return names, per


def ncu(path):
    lines = open(path).read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        return {}
    launches = {}
    for r in csv.DictReader(lines[start:]):
        try:
            launches.setdefault(int(r["ID"]), {"kernel": r["Kernel Name"]})[r["Metric Name"]] = float(
                r["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            continue
    per = {}
    for i in sorted(launches)[2:]:  # the first two launches are the warm-up
        k = launches[i]
        per.setdefault(k["kernel"], []).append(k)
    return per


def compare(ours_path, *ncu_paths):
    names, mine = ours(ours_path)
    for path in ncu_paths:
        theirs = ncu(path)
        print(f"== offtrace (range profiler, median of {max(len(v) for v in mine.values())} launches) vs {path}")
        print(f"{'kernel':10} {'metric':52} {'offtrace':>14} {'ncu':>14} {'diff':>8}")
        for kernel, runs in mine.items():
            for j, m in enumerate(names):
                a = statistics.median(r[j] for r in runs)
                vals = [k[m] for k in theirs.get(kernel, []) if m in k]
                if not vals:
                    print(f"{kernel:10} {m:52} {a:14.2f} {'-':>14}")
                    continue
                b = statistics.median(vals)
                d = 100 * (a - b) / b if b else float("nan")
                print(f"{kernel:10} {m:52} {a:14.2f} {b:14.2f} {d:+7.2f}%")


def pm(path):
    rows = [r for r in csv.reader(open(path)) if r]
    names = next(r for r in rows if r[0] == "report" and r[1] == "ts_ns")[2:]
    reports = [(int(r[1]), [float(x) for x in r[2:]]) for r in rows if r[0] == "report" and r[1] != "ts_ns"]
    phases = [(r[1], int(r[2]), int(r[3])) for r in rows if r[0] == "phase"]
    print(f"{len(reports)} reports; mean per phase (reports in the phase's span minus its first 20 ms)")
    print(f"{'phase':10} {'ms':>6} {'reports':>8} " + " ".join(f"{n[:40]:>42}" for n in names))
    for name, t0, t1 in phases:
        inside = [v for ts, v in reports if t0 + 20_000_000 <= ts <= t1]
        means = [statistics.mean(v[j] for v in inside) if inside else float("nan") for j in range(len(names))]
        print(f"{name:10} {(t1 - t0) / 1e6:6.0f} {len(inside):8} " + " ".join(f"{m:42.2f}" for m in means))
    if reports:
        t_first = phases[0][1] if phases else reports[0][0]
        print("curve (every 10th report): ms since the first phase, values")
        for ts, v in reports[::10]:
            print(f"  {(ts - t_first) / 1e6:8.1f} " + " ".join(f"{x:7.2f}" for x in v))


if __name__ == "__main__":
    if sys.argv[1] == "--pm":
        pm(sys.argv[2])
    else:
        compare(sys.argv[1], *sys.argv[2:])
