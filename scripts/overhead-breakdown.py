#!/usr/bin/env python3
"""Where the end-to-end overhead of tracing comes from: one program run under several
configurations, interleaved, median wall time of each against the plain run.

usage: overhead-breakdown.py [--rounds N] [--bin DIR] [--json] PROGRAM.py [ARGS...]

Configurations (environment on top of the SYCL runtime's own LD_LIBRARY_PATH / OCL_ICD_FILENAMES):

  plain          nothing else
  xpti           XPTI_TRACE_ENABLE=1 + Intel's dispatcher, no subscriber
  xpti+ur        the same + UR_ENABLE_LAYERS=UR_LAYER_TRACING (the UR tracing layer, which
                 `offtrace record` enables for UR calls), still no subscriber
  null-sub       a subscriber that registers like the agent (same streams, every named trace
                 point type, detail level normal) with empty callbacks (scripts/null-subscriber.c,
                 built here with cc), with the UR layer: the runtime's cost of being observed
  agent-no-ur    the agent subscribed (XPTI_SUBSCRIBERS), OFFTRACE_UR_CALLS=0, no UR layer
                 (what `offtrace record --no-ur-calls` sets)
  agent          the agent subscribed with UR calls and the UR layer (what `offtrace record`
                 sets), started directly
  record         `offtrace record -o FILE -- PROGRAM` (adds the CLI process)

So: xpti - plain, xpti+ur - xpti and null-sub - xpti+ur are the runtime's own instrumentation
cost; agent - null-sub is what the agent adds to the fully instrumented runtime; record - agent
is the CLI's share.
The fastest run of each configuration and the median CPU time (user + system of the process
tree, from getrusage) are printed next to the median wall time: both are less sensitive to other
load on the machine. The rounds run the configurations in turn (a round = one run of each, in a rotated order), so
all of them see the same machine state; the median discards outliers. Traces go to a temporary
directory, rewritten every run (the file system cost is included).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIGS = ["plain", "xpti", "xpti+ur", "null-sub", "agent-no-ur", "agent", "record"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--bin", default=os.path.join(here, "target", "release"),
                    help="directory with offtrace and libofftrace_agent.so")
    ap.add_argument("--venv", default=os.environ.get("OFFTRACE_SYCL_VENV", os.path.join(here, ".venv")))
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    ap.add_argument("program", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if not a.program:
        sys.exit(__doc__)
    configs = [c for c in a.configs.split(",") if c]
    for c in configs:
        if c not in CONFIGS:
            sys.exit(f"unknown configuration {c}; known: {', '.join(CONFIGS)}")
    lib = os.path.join(a.venv, "lib")
    py = os.path.join(a.venv, "bin", "python")
    dispatcher = os.path.join(lib, "libxptifw.so.1")
    agent = os.path.join(os.path.abspath(a.bin), "libofftrace_agent.so")
    offtrace = os.path.join(os.path.abspath(a.bin), "offtrace")
    base = dict(os.environ)
    for k in list(base):
        if k.startswith("XPTI_") or k.startswith("OFFTRACE_") or k == "UR_ENABLE_LAYERS":
            del base[k]
    base["LD_LIBRARY_PATH"] = lib
    base["OCL_ICD_FILENAMES"] = os.path.join(lib, "libintelocl.so")
    tmp = tempfile.mkdtemp(prefix="offtrace-breakdown-")
    trace = os.path.join(tmp, "t.offtrace")

    nullsub = None
    if "null-sub" in configs:
        nullsub = os.path.join(tmp, "libnullsub.so")
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", nullsub, os.path.join(here, "scripts", "null-subscriber.c"),
                        "-L" + lib, "-l:libxptifw.so.1"], check=True)

    def command(c):
        env = dict(base)
        cmd = [py] + a.program
        if c in ("xpti", "xpti+ur", "null-sub", "agent-no-ur", "agent"):
            env["XPTI_TRACE_ENABLE"] = "1"
            env["XPTI_FRAMEWORK_DISPATCHER"] = dispatcher
        if c in ("xpti+ur", "null-sub", "agent"):
            env["UR_ENABLE_LAYERS"] = "UR_LAYER_TRACING"
        if c == "null-sub":
            env["XPTI_SUBSCRIBERS"] = nullsub
        if c in ("agent-no-ur", "agent"):
            env["XPTI_SUBSCRIBERS"] = agent
            env["OFFTRACE_OUTPUT"] = trace
            env["OFFTRACE_UR_CALLS"] = "1" if c == "agent" else "0"
        if c == "record":
            cmd = [offtrace, "record", "--dispatcher", "intel", "-o", trace, "--"] + cmd
        return cmd, env

    times = {c: [] for c in configs}
    cpu = {c: [] for c in configs}
    for r in range(a.rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        for c in order:
            cmd, env = command(c)
            if os.path.exists(trace):
                os.remove(trace)
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[c].append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[c].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    med = {c: statistics.median(v) for c, v in times.items()}
    ref = med.get("plain")
    res = {"program": " ".join(a.program), "rounds": a.rounds,
           "load_avg_after": os.getloadavg()[0],
           "configs": {c: {"median_s": round(med[c], 4),
                           "q1_s": round(statistics.quantiles(times[c], n=4)[0], 4) if len(times[c]) > 1 else None,
                           "q3_s": round(statistics.quantiles(times[c], n=4)[2], 4) if len(times[c]) > 1 else None,
                           "min_s": round(min(times[c]), 4),
                           "vs_plain_pct": round(100 * (med[c] / ref - 1), 2) if ref else None,
                           "min_vs_plain_pct": round(100 * (min(times[c]) / min(times["plain"]) - 1), 2)
                           if "plain" in times else None,
                           "cpu_median_s": round(statistics.median(cpu[c]), 4),
                           "cpu_vs_plain_pct": round(100 * (statistics.median(cpu[c]) / statistics.median(cpu["plain"]) - 1), 2)
                           if "plain" in cpu else None}
                       for c in configs}}
    if a.json:
        print(json.dumps(res))
        return
    print(f"{res['program']}: {a.rounds} rounds, load average after {res['load_avg_after']:.2f}")
    print(f"{'configuration':14} {'median s':>9} {'q1':>8} {'q3':>8} {'vs plain':>9} {'min s':>8} {'vs plain':>9}"
          f" {'CPU s':>8} {'vs plain':>9}")
    for c, v in res["configs"].items():
        f = lambda x: "" if x is None else f"{x:+.1f}%"
        print(f"{c:14} {v['median_s']:9.4f} {v['q1_s'] or 0:8.4f} {v['q3_s'] or 0:8.4f} {f(v['vs_plain_pct']):>9}"
              f" {v['min_s']:8.4f} {f(v['min_vs_plain_pct']):>9} {v['cpu_median_s']:8.4f} {f(v['cpu_vs_plain_pct']):>9}")


if __name__ == "__main__":
    main()
