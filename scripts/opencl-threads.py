#!/usr/bin/env python3
"""Instructions per kernel by thread: `many_kernels` under callgrind with --separate-threads.

    scripts/opencl-threads.py --program /tmp/many [--rounds 3] [--kernels 1000] plain LAYER...

Per kernel = (Ir at 3N - Ir at N) / 2N of each thread kind (N = --kernels), the layers (`plain`:
none) interleaved in each round, PoCL (OFFTRACE_CL_PLATFORM=Portable), `--calls 0`, a trace
recorded (OFFTRACE_OUTPUT) when a layer is loaded. Thread kinds: `program` (the main thread:
what the program's wall time pays), `harvest` (the layer's offtrace-opencl thread), `writer`
(the recorder's), `runtime` (the rest: PoCL's threads). docs/overhead.md, *OpenCL layer*.
"""
import argparse
import glob
import os
import re
import statistics
import subprocess
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--program", required=True, help="many_kernels built from examples/opencl/many_kernels.c")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--kernels", type=int, default=1000)
ap.add_argument("layers", nargs="+", help="`plain` or a libofftrace_opencl.so")
opts = ap.parse_args()


def kind(text):
    th = int(re.search(r"^thread:\s+(\d+)", text, re.M).group(1))
    if th == 1:
        return "program"
    if "in_order::harvest_thread" in text:
        return "harvest"
    if "writer_main" in text:
        return "writer"
    return "runtime"


def run(layer, n):
    with tempfile.TemporaryDirectory(prefix="offtrace-threads-") as d:
        env = dict(os.environ, OFFTRACE_CL_PLATFORM="Portable")
        if layer != "plain":
            env.update(OPENCL_LAYERS=layer, OFFTRACE_OUTPUT=os.path.join(d, "t.offtrace"))
        cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={d}/cg.out",
               opts.program, "--kernels", str(n), "--calls", "0"]
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        res = {}
        for f in glob.glob(f"{d}/cg.out-*"):
            text = open(f, errors="replace").read()
            m = re.search(r"^summary:\s+(\d+)", text, re.M)
            if m:
                k = kind(text)
                res[k] = res.get(k, 0) + int(m.group(1))
        return res


runs = {layer: [] for layer in opts.layers}
n = opts.kernels
for r in range(opts.rounds):
    for layer in opts.layers:
        a, b = run(layer, n), run(layer, 3 * n)
        per = {k: (b.get(k, 0) - a.get(k, 0)) / (2 * n) for k in set(a) | set(b)}
        per["all"] = (sum(b.values()) - sum(a.values())) / (2 * n)
        runs[layer].append(per)
        print(f"round {r + 1} {layer}: " + ", ".join(f"{k} {v:,.0f}" for k, v in sorted(per.items())), flush=True)
for layer in opts.layers:
    keys = sorted(set().union(*runs[layer]))
    med = ", ".join(f"{k} {statistics.median(p.get(k, 0) for p in runs[layer]):,.0f}" for k in keys)
    print(f"median {layer}: {med}")
