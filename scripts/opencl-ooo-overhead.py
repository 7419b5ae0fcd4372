#!/usr/bin/env python3
"""What recording costs a program that enqueues thousands of small kernels on an OUT-OF-ORDER
queue, beside the same program on an in-order queue (docs/overhead.md, "OpenCL out-of-order
queues").

usage: scripts/opencl-ooo-overhead.py [--rounds N] [--kernels N] [--runtime pocl|intel|both]
       scripts/opencl-ooo-overhead.py --callgrind [--reps N] [--runtime pocl|intel]

Builds examples/opencl/ooo_many_kernels.c and runs it with the configurations interleaved:

  plain-in-order   no layer, in-order queue (`--in-order`: the same atomic_inc kernel)
  plain-ooo        no layer, out-of-order queue
  events-ooo       plain-ooo, the queue profiled and each kernel's event asked for and released
                   (`--profile --events`): the runtime's own floor of a tracer that reads events
  record-in-order  the layer recording a trace (OFFTRACE_OUTPUT), in-order queue
  record-ooo       the layer recording a trace, out-of-order queue: every command goes to the
                   layer's unordered list, which its harvest thread polls (one status query per
                   outstanding command, at most 1024 per round, a round each millisecond)

Wall: ns per kernel of the program's timed loop (N enqueues + clFinish), and the whole process's
wall time (start-up, the program's build, the layer's harvest of what clFinish left, the
writer's end and the exit included) with its difference to plain per kernel; median / minimum
over the rounds.

--callgrind: instructions on all threads (callgrind's total Ir, every thread of the process), per
kernel = (Ir at 3 N - Ir at N) / 2 N with N = --kernels (default 1000), median of --reps runs;
PoCL's worker threads spin for a timing-dependent while, so the plain rows move too.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

root = Path(__file__).resolve().parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("--kernels", type=int)
ap.add_argument("--items", type=int, default=64, help="work items per kernel")
ap.add_argument("--runtime", default="both", choices=["pocl", "intel", "both"])
ap.add_argument("--callgrind", action="store_true")
ap.add_argument("--reps", type=int, default=3)
opts = ap.parse_args()
kernels = opts.kernels or (1000 if opts.callgrind else 20000)

layer = root / "target/release/libofftrace_opencl.so"
if not layer.exists():
    sys.exit(f"opencl-ooo-overhead: {layer} missing: cargo build --release -p offtrace-opencl")
tmp = Path(tempfile.mkdtemp(prefix="offtrace-ocl-ooo-"))
exe = tmp / "ooo_many_kernels"
subprocess.run(["cc", "-O2", str(root / "examples/opencl/ooo_many_kernels.c"), "-lOpenCL", "-o", str(exe)], check=True)

venv = Path(os.environ.get("OFFTRACE_SYCL_VENV", root / ".venv"))
runtimes = {
    "pocl": {"OFFTRACE_CL_PLATFORM": "Portable"},
    "intel": {"OFFTRACE_CL_PLATFORM": "Intel", "LD_LIBRARY_PATH": str(venv / "lib"),
              "OCL_ICD_FILENAMES": str(venv / "lib/libintelocl.so")},
}
configs = {
    "plain-in-order": ["--in-order"],
    "plain-ooo": [],
    "events-ooo": ["--profile", "--events"],
    "record-in-order": ["--in-order"],
    "record-ooo": [],
}


def command(rt, cfg, n, prefix=()):
    env = dict(os.environ, **runtimes[rt])
    if cfg.startswith("record"):
        env["OPENCL_LAYERS"] = str(layer)
        env["OFFTRACE_OUTPUT"] = str(tmp / f"{rt}-{cfg}.offtrace")
        # A trace already there would be kept and this run's written beside it (`<path>.<pid>`).
        if os.path.exists(env["OFFTRACE_OUTPUT"]):
            os.remove(env["OFFTRACE_OUTPUT"])
    args = list(prefix) + [str(exe), "--kernels", str(n), "--items", str(opts.items)] + configs[cfg]
    return args, env


def wall(rt, cfg):
    args, env = command(rt, cfg, kernels)
    t0 = time.monotonic_ns()
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True).stdout
    t1 = time.monotonic_ns()
    return float(out.split("\n")[0].split(": ")[1].split()[0]), (t1 - t0) / kernels


def instructions(rt, cfg, n):
    out = tmp / "cg.out"
    args, env = command(rt, cfg, n, ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
    r = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    m = re.search(r"Collected : (\d+)", r.stderr)
    if not m:
        sys.exit(f"no callgrind total for {cfg}:\n{r.stderr[-2000:]}")
    return int(m.group(1))


def measure_wall(rt):
    res = {c: ([], []) for c in configs}
    for _ in range(opts.rounds):
        for c in configs:
            loop, proc = wall(rt, c)
            res[c][0].append(loop)
            res[c][1].append(proc)
    load = os.getloadavg()
    print(f"\n{rt}: {kernels} kernels of {opts.items} work items, {opts.rounds} rounds (median / min); "
          f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} after the runs\n")
    print("| configuration | loop, ns per kernel | vs plain of its queue (medians) | process, ms | process vs plain of its queue, ns per kernel (medians) |")
    print("|---|---|---|---|---|")
    for c in configs:
        base = "plain-ooo" if c.endswith("ooo") else "plain-in-order"
        (loop, proc), (bl, bp) = res[c], res[base]
        ml, mp = statistics.median(loop), statistics.median(proc)
        print(f"| {c} | {ml:.0f} / {min(loop):.0f} | {100 * (ml / statistics.median(bl) - 1):+.1f} % "
              f"| {mp * kernels / 1e6:.1f} / {min(proc) * kernels / 1e6:.1f} | {mp - statistics.median(bp):+.0f} |")


def measure_instructions(rt):
    res = {c: [] for c in configs}
    for _ in range(opts.reps):
        for c in configs:
            res[c].append((instructions(rt, c, 3 * kernels) - instructions(rt, c, kernels)) / (2 * kernels))
    print(f"\n{rt}: instructions per kernel, all threads (callgrind total Ir, (3N - N) / 2N, N = {kernels}), "
          f"median of {opts.reps} (runs)\n")
    print("| configuration | per kernel | runs | vs plain of its queue |")
    print("|---|---:|---|---:|")
    for c in configs:
        base = "plain-ooo" if c.endswith("ooo") else "plain-in-order"
        m, b = statistics.median(res[c]), statistics.median(res[base])
        print(f"| {c} | {m:,.0f} | {' / '.join(f'{v:,.0f}' for v in res[c])} | {m - b:+,.0f} |")


try:
    for rt in (["pocl", "intel"] if opts.runtime == "both" else [opts.runtime]):
        (measure_instructions if opts.callgrind else measure_wall)(rt)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
