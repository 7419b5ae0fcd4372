#!/usr/bin/env python3
"""Compares PM sampling's utilisation curve with the kernels' device busy time in ONE trace.

Input: the JSON lines of `trace_jsonl TRACE` (crates/offtrace-cuda/examples/trace_jsonl.rs) for a
trace recorded with `offtrace record --metrics cupti.pm_sampling --sample-period 1ms -- PROGRAM`.

Each counter sample of METRIC (default gr__cycles_active...) is one PM hardware sample at its
own end on the GPU, mapped onto the trace clock (traces recorded before that: the mean of the
samples decoded since the previous report, at its emission time); either way sample k covers
(ts[k-1], ts[k]]. For every such bin the kernels' busy fraction (the union of the kernels'
[start, end) on the trace clock, clipped to the bin) is compared with value/100. Reported: the
number of bins, mean |difference| (percentage points), Pearson correlation, and the same with
the kernel curve shifted by whole reports (lag: PM reports come late by up to a period, since a
hardware sample is decoded only once complete), plus the busy totals.

    python3 scripts/metrics/pm_vs_kernels.py trace.jsonl [--metric gr__cycles_active] [--csv out.csv]
"""
import argparse
import json
import math
import sys


def union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def busy_in(busy, lo, hi, start_idx):
    """Busy ns of the sorted disjoint intervals `busy` within [lo, hi); start_idx speeds the scan."""
    total = 0
    i = start_idx
    while i < len(busy) and busy[i][1] <= lo:
        i += 1
    first = i
    while i < len(busy) and busy[i][0] < hi:
        total += max(0, min(hi, busy[i][1]) - max(lo, busy[i][0]))
        i += 1
    return total, first


def stats(xs, ys):
    n = len(xs)
    mad = sum(abs(x - y) for x, y in zip(xs, ys)) / n
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    r = sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")
    return mad, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--metric", default="gr__cycles_active")
    ap.add_argument("--csv")
    ap.add_argument("--max-lag", type=int, default=3)
    a = ap.parse_args()
    kernels, defs, samples = [], {}, {}
    with open(a.jsonl) as f:
        for line in f:
            r = json.loads(line)
            t = r.get("t")
            if t == "kernel":
                kernels.append((r["start"], r["end"]))
            elif t == "counter_def":
                defs[r["counter"]] = r["name"]
            elif t == "counter":
                samples.setdefault(r["counter"], []).append((r["ts"], r["value"]))
    ids = [c for c, n in defs.items() if a.metric in n]
    if not kernels or not ids:
        print(f"no kernels ({len(kernels)}) or no counter named *{a.metric}* (counters: {sorted(defs.values())})")
        return 2
    counter = ids[0]
    name = defs[counter]
    pts = sorted(samples.get(counter, []))
    busy = union(kernels)
    k_lo, k_hi = busy[0][0], busy[-1][1]
    # Bins of the reports: (ts[k-1], ts[k]].
    bins = []
    idx = 0
    for (t0, _), (t1, v) in zip(pts, pts[1:]):
        b, idx = busy_in(busy, t0, t1, idx)
        bins.append((t0, t1, b / (t1 - t0) * 100.0 if t1 > t0 else 0.0, v))
    # Only the bins while the program ran kernels, plus 20 ms either side (the idle tails of a
    # run that ends later measure nothing of interest but would inflate the agreement).
    lo, hi = k_lo - 20_000_000, k_hi + 20_000_000
    sel = [b for b in bins if b[0] >= lo and b[1] <= hi]
    periods = sorted(t1 - t0 for t0, t1, _, _ in sel)
    print(f"metric: {name}")
    print(f"kernels: {len(kernels)}, device busy (union) {sum(e - s for s, e in busy) / 1e6:.2f} ms "
          f"over {(k_hi - k_lo) / 1e6:.2f} ms")
    print(f"reports: {len(pts)} in the trace, {len(sel)} bins compared; report period median "
          f"{periods[len(periods) // 2] / 1e6:.3f} ms (p10 {periods[len(periods) // 10] / 1e6:.3f}, "
          f"p90 {periods[len(periods) * 9 // 10] / 1e6:.3f})")
    kb = [b[2] for b in sel]
    pm = [b[3] for b in sel]
    print(f"mean busy: kernels {sum(kb) / len(kb):.2f} %, PM {sum(pm) / len(pm):.2f} %")
    best = None
    for lag in range(-a.max_lag, a.max_lag + 1):
        # lag > 0: PM report k compared with the kernels' bin k-lag (PM late).
        pairs = [(kb[i - lag], pm[i]) for i in range(len(sel)) if 0 <= i - lag < len(sel)]
        mad, r = stats([p[0] for p in pairs], [p[1] for p in pairs])
        print(f"lag {lag:+d} reports: mean |PM - kernel busy| {mad:6.2f} points, correlation {r:.4f} ({len(pairs)} bins)")
        if best is None or mad < best[1]:
            best = (lag, mad, r)
    print(f"best lag {best[0]:+d}: mean |diff| {best[1]:.2f} points, correlation {best[2]:.4f}")
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("t0_ns,t1_ns,kernel_busy_pct,pm_pct\n")
            for t0, t1, k, v in sel:
                f.write(f"{t0},{t1},{k:.3f},{v:.3f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
