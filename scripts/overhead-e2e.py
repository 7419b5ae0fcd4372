#!/usr/bin/env python3
"""End-to-end wall-time overhead of `offtrace record` against an untraced run, side by side.

usage: overhead-e2e.py [--rounds N] [--bin DIR] [--bin-b DIR] [--dispatcher intel|offtrace] PROGRAM.py [ARGS...]

Runs the program alternately untraced (the SYCL runtime's own environment only: LD_LIBRARY_PATH,
OCL_ICD_FILENAMES) and under `offtrace record`, N rounds each (default 11), and prints the median
wall time of each, the overhead in percent, and the trace's records and bytes per record.
Interleaving the two makes both see the same machine state; the median discards outliers.
With --bin-b, a second build (another commit's binaries) is traced in the same rounds too, so
two versions of offtrace are compared side by side against the same untraced runs.
"""
import argparse
import json
import os
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
    for _ in range(a.rounds):
        if a.bin_b:
            t0 = time.perf_counter()
            subprocess.run([os.path.join(a.bin_b, "offtrace"), "record", "--dispatcher", a.dispatcher, "-o",
                            os.path.join(tmp, "b.offtrace"), "--", py] + a.program,
                           env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            traced_b.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([py] + a.program, env=env, check=True, stdout=subprocess.DEVNULL)
        plain.append(time.perf_counter() - t0)
        if os.path.exists(trace):
            os.remove(trace)
        t0 = time.perf_counter()
        subprocess.run([offtrace, "record", "--dispatcher", a.dispatcher, "-o", trace, "--", py] + a.program,
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        traced.append(time.perf_counter() - t0)
    rep = json.loads(subprocess.run([offtrace, "report", trace, "--format", "json"], check=True,
                                    capture_output=True, text=True).stdout)
    records = sum(n for s in rep["notifications"].values() for n in s.values())
    size = os.path.getsize(trace)
    mp, mt = statistics.median(plain), statistics.median(traced)
    res = {"program": " ".join(a.program), "rounds": a.rounds, "dispatcher": a.dispatcher,
           "untraced_s": round(mp, 4), "traced_s": round(mt, 4),
           "overhead_pct": round(100 * (mt / mp - 1), 2), "notifications": records,
           "trace_bytes": size, "bytes_per_notification": round(size / max(records, 1), 2)}
    if traced_b:
        mb = statistics.median(traced_b)
        res["b_traced_s"] = round(mb, 4)
        res["b_overhead_pct"] = round(100 * (mb / mp - 1), 2)
    if a.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:24} {v}")


if __name__ == "__main__":
    main()
