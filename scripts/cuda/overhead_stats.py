"""Per-mode statistics of an overhead run (scripts/cuda/overhead-ablation.sh's per-process JSON),
with the process as the unit: each fresh process gives one number (its median step time), so a
process that lands in a slow state counts once, whatever its mode.

    python overhead_stats.py RESULTS_DIR OUT.json

Per mode: the median of the per-process medians, their interquartile range and extremes, and
the overhead against `untraced` two ways: (1) median against median; (2) paired: in each
repetition, the mode's process against that repetition's untraced process, median over the
repetitions (drift of the machine between repetitions cancels). `untraced_b` (a second untraced
process per repetition) against `untraced` is the noise floor: an overhead smaller than it is
not resolved by the run. Also the same for each process's fast steps (its 10th percentile: the
host's bursts of slow steps left out), each process's CPU probe (a fixed Python loop) and placement, and
the medians within the fast-probe and slow-probe processes (split where the two groups' summed squared
deviations are smallest, over the probes of all processes: two-means in one dimension): a mode that happened to get more fast processes looks cheaper
than it is, a comparison inside one group does not.
"""
import collections
import json
import os
import statistics
import sys


def quartiles(xs):
    xs = sorted(xs)
    if len(xs) < 4:
        return xs[0], xs[-1]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def main(results_dir, out_path):
    per = collections.defaultdict(dict)  # mode -> rep -> per-process median
    fast = collections.defaultdict(dict)  # mode -> rep -> per-process 10th percentile
    probe = collections.defaultdict(dict)  # mode -> rep -> CPU probe (ms)
    placement = collections.defaultdict(set)
    threads = collections.defaultdict(list)  # mode -> per process: see thread_summary
    for f in sorted(os.listdir(results_dir)):
        if not f.endswith(".json") or f.endswith(".torch.json"):
            continue
        mode, rep = f[:-5].rsplit("-", 1)
        r = json.load(open(os.path.join(results_dir, f)))
        if "ab_step_ns" in r:
            continue  # phases alternated inside the process: ab_phases below
        per[mode][int(rep)] = statistics.median(r["step_ns"])
        fast[mode][int(rep)] = sorted(r["step_ns"])[len(r["step_ns"]) // 10]
        probe[mode][int(rep)] = r.get("cpu_probe_ns", 0) / 1e6
        placement[mode].add((tuple(r.get("affinity", [])), r.get("torch_threads")))
        if r.get("threads"):
            threads[mode].append(thread_summary(r["threads"]))
    base = per["untraced"]
    bmed = statistics.median(base.values())
    res = {}
    print(f"{'mode':11} {'procs':>5} {'median ms':>9} {'IQR ms':>15} {'min..max ms':>15} "
          f"{'vs median':>9} {'IQR %':>13} {'paired':>8} {'paired IQR %':>14}  CPU probe ms (median, min..max)")
    for mode in ["untraced", "untraced_b"] + sorted(m for m in per if m not in ("untraced", "untraced_b")):
        if mode not in per:
            continue
        v = per[mode]
        xs = list(v.values())
        m = statistics.median(xs)
        lo, hi = quartiles(xs)
        paired = [(v[r] / base[r] - 1) * 100 for r in sorted(v) if r in base]
        pm = statistics.median(paired) if paired else float("nan")
        plo, phi = quartiles(paired) if paired else (float("nan"), float("nan"))
        res[mode] = {
            "processes": len(xs),
            "median_ns": m,
            "iqr_ns": [lo, hi],
            "min_ns": min(xs),
            "max_ns": max(xs),
            "overhead_pct": (m / bmed - 1) * 100,
            "iqr_pct": [(lo / bmed - 1) * 100, (hi / bmed - 1) * 100],
            "paired_overhead_pct": pm,
            "paired_iqr_pct": [plo, phi],
            "paired_pct": paired,
            "process_medians_ns": {str(r): v[r] for r in sorted(v)},
            "cpu_probe_ms": [probe[mode][r] for r in sorted(v)],
            "placement": sorted([list(a), t] for a, t in placement[mode]),
        }
        p = sorted(probe[mode].values())
        print(f"{mode:11} {len(xs):5} {m / 1e6:9.3f} {lo / 1e6:7.3f}..{hi / 1e6:<7.3f} "
              f"{min(xs) / 1e6:7.3f}..{max(xs) / 1e6:<7.3f} {(m / bmed - 1) * 100:+8.2f}% "
              f"{(lo / bmed - 1) * 100:+6.1f}..{(hi / bmed - 1) * 100:+.1f} {pm:+7.2f}% {plo:+6.1f}..{phi:+.1f}  "
              f"{statistics.median(p):.2f}, {p[0]:.2f}..{p[-1]:.2f}")
    # The host stalls every mode for bursts of 3-5 consecutive steps at 3-4x (run P: untraced
    # processes too); a process's fast steps (its 10th percentile) leave those out and keep the
    # per-launch cost, which every step pays.
    fbase = fast["untraced"]
    fbmed = statistics.median(fbase.values())
    print("fast steps (each process's 10th percentile of its steps): median over processes, paired")
    for mode in res:
        v = fast[mode]
        m = statistics.median(v.values())
        paired = [(v[r] / fbase[r] - 1) * 100 for r in sorted(v) if r in fbase]
        pm = statistics.median(paired) if paired else float("nan")
        res[mode]["p10"] = {"median_ns": m, "overhead_pct": (m / fbmed - 1) * 100, "paired_overhead_pct": pm}
        print(f"  {mode:11} {m / 1e6:7.3f} ms {(m / fbmed - 1) * 100:+6.2f}%  paired {pm:+6.2f}%")
    print("per-process medians (ms) by repetition:")
    for mode in res:
        v = per[mode]
        print(f"  {mode:11} " + " ".join(f"{r}:{v[r] / 1e6:.3f}" for r in sorted(v)))
    probes = sorted(p for m in per for p in probe[m].values())
    def sse(xs):
        mu = statistics.mean(xs)
        return sum((x - mu) ** 2 for x in xs)

    _, split = min((sse(probes[:i]) + sse(probes[i:]), (probes[i - 1] + probes[i]) / 2) for i in range(1, len(probes)))
    procs = collections.defaultdict(lambda: {"fast": [], "slow": []})
    for mode in res:
        for r in per[mode]:
            procs[mode]["fast" if probe[mode][r] < split else "slow"].append(per[mode][r])
    bases = {g: procs["untraced"][g] + procs["untraced_b"][g] for g in ("fast", "slow")}
    print(f"by CPU probe (fast < {split:.2f} ms <= slow); against untraced and "
          "untraced_b together in the same group:")
    for mode in res:
        cells = []
        for g in ("fast", "slow"):
            xs = procs[mode][g]
            if not xs or not bases[g]:
                cells.append(f"{g} {len(xs)} -")
                continue
            m, b = statistics.median(xs), statistics.median(bases[g])
            res[mode][f"{g}_probe"] = {"processes": len(xs), "median_ns": m, "overhead_pct": (m / b - 1) * 100}
            cells.append(f"{g} {len(xs)} {m / 1e6:.3f} ms {(m / b - 1) * 100:+.1f}%")
        print(f"  {mode:11} " + "   ".join(cells))
    print("placement (CPUs, torch threads) per mode: "
          + "; ".join(f"{k} {v['placement']}" for k, v in res.items()))
    print("threads in the window, median per process (min..max): threads; involuntary switches of "
          "the launching threads (main + pt_autograd_0); their CPU ticks (10 ms); ticks of all other threads")
    for mode in res:
        t = threads.get(mode)
        if not t:
            continue
        cols = {}
        for k in ("threads", "launch_nvcs", "launch_ticks", "other_ticks"):
            xs = [x[k] for x in t]
            cols[k] = {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
        res[mode]["threads"] = cols
        print(f"  {mode:11} " + "  ".join(f"{k} {c['median']:g} ({c['min']}..{c['max']})" for k, c in cols.items()))
    ab = ab_phases(results_dir, bmed)
    if ab:
        res["ab_phases"] = ab
    json.dump(res, open(out_path, "w"), indent=1)


LAUNCHING = ("main", "pt_autograd_0")


def thread_summary(th):
    """One process's threads in the window (train.py's "threads": by name, ticks, involuntary
    context switches): are the launching threads preempted, and does anything else run?"""
    return {
        "threads": sum(v["threads"] for v in th.values()),
        "launch_nvcs": sum(th[k]["nvcs"] for k in LAUNCHING if k in th),
        "launch_ticks": sum(th[k]["ticks"] for k in LAUNCHING if k in th),
        "other_ticks": sum(v["ticks"] for k, v in th.items() if k not in LAUNCHING),
    }


PHASES = {"0": "nothing (subscribed)", "1": "default", "2": "activity only", "3": "callbacks return at once",
          "4": "no driver callbacks", "5": "callbacks, no activity", "6": "no runtime callbacks"}


def ab_issue(r):
    """Per phase, the issue times of its timed steps: `ab_issue_ns`, or (files written before
    train.py kept it) rebuilt from `issue_ns` in the order train.py ran the phases: rounds of the
    phases rotated by one per round, one untimed settling step and `ab_block` timed steps each."""
    if "ab_issue_ns" in r:
        return r["ab_issue_ns"]
    phases = list(r["ab_step_ns"])
    block = r["ab_block"]
    rounds = len(r["ab_step_ns"][phases[0]]) // block
    out = {p: [] for p in phases}
    i = 0
    for rd in range(rounds):
        k = rd % len(phases)
        for p in phases[k:] + phases[:k]:
            for _ in range(block):
                out[p].append(r["issue_ns"][i])
                i += 1
    return out


def ab_phases(results_dir, untraced_ns):
    """Processes of `train.py --ab` (mode `ab`): each phase's median step time against phase 0
    (nothing traced) of the same process, then the median (and range) over the processes."""
    per, issue = {}, {}
    for f in sorted(os.listdir(results_dir)):
        if not f.endswith(".json") or f.endswith(".torch.json"):
            continue
        r = json.load(open(os.path.join(results_dir, f)))
        if "ab_step_ns" in r:
            per[f[:-5]] = {p: statistics.median(v) for p, v in r["ab_step_ns"].items()}
            issue[f[:-5]] = {p: statistics.median(v) for p, v in ab_issue(r).items()}
    if not per:
        return None
    phases = sorted({p for v in per.values() for p in v}, key=int)
    print(f"in-process phases (train.py --ab; {len(per)} processes): each phase's median step against "
          "phase 0 of the same process, median (min..max) over the processes; issue: the same for the "
          "time the step's last launch returned (the launching threads' cost), in ms")
    out = {}
    for p in phases:
        pct = [(v[p] / v["0"] - 1) * 100 for v in per.values() if p in v and "0" in v]
        ms = [v[p] for v in per.values() if p in v]
        di = [(v[p] - v["0"]) / 1e6 for v in issue.values() if p in v and "0" in v]
        out[p] = {"name": PHASES.get(p, p), "vs_phase0_pct": statistics.median(pct), "per_process_pct": pct,
                  "median_ns": statistics.median(ms), "vs_untraced_processes_pct": (statistics.median(ms) / untraced_ns - 1) * 100,
                  "issue_vs_phase0_ms": statistics.median(di), "issue_per_process_ms": di}
        print(f"  phase {p} {PHASES.get(p, p):26} {statistics.median(ms) / 1e6:7.3f} ms  "
              f"{statistics.median(pct):+6.2f}% ({min(pct):+.1f}..{max(pct):+.1f})  "
              f"vs untraced processes {(statistics.median(ms) / untraced_ns - 1) * 100:+.1f}%  "
              f"issue {statistics.median(di):+.2f} ms ({min(di):+.2f}..{max(di):+.2f})")
    return out


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
