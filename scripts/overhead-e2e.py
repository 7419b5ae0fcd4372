#!/usr/bin/env python3
"""End-to-end wall-time overhead of `offtrace record` against an untraced run, side by side.

usage: overhead-e2e.py [--rounds N] [--bin DIR] [--bin-b DIR] [--dispatcher intel|offtrace] PROGRAM.py [ARGS...]

Runs the program alternately untraced (the SYCL runtime's own environment only: LD_LIBRARY_PATH,
OCL_ICD_FILENAMES) and under `offtrace record`, N rounds each (default 11), and prints the median
wall time of each, the overhead in percent, and the trace's records and bytes per record.
Interleaving the two makes both see the same machine state; the median discards outliers.
With --bin-b, a second build (another commit's binaries) is traced in the same rounds too, so
two versions of offtrace are compared side by side against the same untraced runs.

Besides wall time it reports the CPU time (user + sys, of the program and everything it waited
for: the runtime's threads, offtrace's writer thread) per configuration, medians, and the load
average before and after the rounds (the machine's other work, which wall times depend on).
--raw (also --raw-b) records the optional raw layer too (`offtrace record --raw`).
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--bin", default=os.path.join(here, "target", "release"))
    ap.add_argument("--bin-b", default=None, help="a second build's binary folder, traced in the same rounds")
    ap.add_argument("--dispatcher", default="intel")
    ap.add_argument("--raw", action="store_true", help="offtrace record --raw (the raw layer too)")
    ap.add_argument("--raw-b", action="store_true", help="--raw for the --bin-b build")
    ap.add_argument("--venv", default=os.environ.get("OFFTRACE_SYCL_VENV", os.path.join(here, ".venv")))
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    ap.add_argument("program", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if not a.program:
        sys.exit(__doc__)
    py = os.path.join(a.venv, "bin", "python")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.join(a.venv, "lib")
    env["OCL_ICD_FILENAMES"] = os.path.join(a.venv, "lib", "libintelocl.so")
    for k in list(env):
        if k.startswith("XPTI_") or k.startswith("OFFTRACE_") or k == "UR_ENABLE_LAYERS":
            del env[k]
    offtrace = os.path.join(a.bin, "offtrace")
    tmp = tempfile.mkdtemp(prefix="offtrace-overhead-")
    trace = os.path.join(tmp, "t.offtrace")
    plain, traced, traced_b = [], [], []
    cpu_plain, cpu_traced, cpu_b = [], [], []

    def timed(cmd, wall, cpu, **kw):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, **kw)
        wall.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))

    load_before = os.getloadavg()
    for _ in range(a.rounds):
        if a.bin_b:
            timed([os.path.join(a.bin_b, "offtrace"), "record", "--dispatcher", a.dispatcher] + (["--raw"] if a.raw_b else [])
                  + ["-o", os.path.join(tmp, "b.offtrace"), "--", py] + a.program, traced_b, cpu_b,
                  stderr=subprocess.DEVNULL)
        timed([py] + a.program, plain, cpu_plain)
        if os.path.exists(trace):
            os.remove(trace)
        timed([offtrace, "record", "--dispatcher", a.dispatcher] + (["--raw"] if a.raw else []) + ["-o", trace, "--", py]
              + a.program, traced, cpu_traced, stderr=subprocess.DEVNULL)
    load_after = os.getloadavg()
    rep = json.loads(subprocess.run([offtrace, "report", trace, "--format", "json"], check=True,
                                    capture_output=True, text=True).stdout)
    notifications = sum(n for s in rep.get("notifications", {}).values() for n in s.values())
    ur_calls = sum(c["calls"] for c in rep.get("api_calls", []) if c.get("kind") == "UR_API")
    records = int(rep.get("trace", {}).get("records", 0) or 0)
    size = os.path.getsize(trace)
    mp, mt = statistics.median(plain), statistics.median(traced)
    cp, ct = statistics.median(cpu_plain), statistics.median(cpu_traced)
    res = {"program": " ".join(a.program), "rounds": a.rounds, "dispatcher": a.dispatcher, "raw": a.raw,
           "untraced_s": round(mp, 4), "traced_s": round(mt, 4),
           "overhead_pct": round(100 * (mt / mp - 1), 2),
           "untraced_cpu_s": round(cp, 4), "traced_cpu_s": round(ct, 4),
           "cpu_overhead_pct": round(100 * (ct / cp - 1), 2),
           "ur_calls": ur_calls, "raw_notifications": notifications, "records": records,
           "trace_bytes": size, "bytes_per_record": round(size / max(records, 1), 2),
           "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after]}
    if traced_b:
        mb, cb = statistics.median(traced_b), statistics.median(cpu_b)
        res["b_raw"] = a.raw_b
        res["b_traced_s"] = round(mb, 4)
        res["b_overhead_pct"] = round(100 * (mb / mp - 1), 2)
        res["b_traced_cpu_s"] = round(cb, 4)
        res["b_cpu_overhead_pct"] = round(100 * (cb / cp - 1), 2)
    if a.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:24} {v}")


if __name__ == "__main__":
    main()
