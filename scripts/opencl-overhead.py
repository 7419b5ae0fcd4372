#!/usr/bin/env python3
"""The OpenCL layer's overhead, measured side by side in one run.

usage: scripts/opencl-overhead.py [--rounds N] [--kernels N] [--calls N] [--runtime pocl|intel|both]

Builds examples/opencl/many_kernels.c, then runs it in rounds, the configurations interleaved
(so that the machine's load drifts over all of them alike):

  plain      no layer
  profiling  no layer, the queue created with CL_QUEUE_PROFILING_ENABLE (the runtime's own profiling)
  events     `profiling`, and the program asks for each kernel's event (released right after the
             enqueue): what an event with profiling costs the runtime, the floor of any tracer
             that reads device times from events
  layer      the layer loaded, nothing listening (profiling forced on and hidden; no callbacks)
  record     the layer recording a trace (OFFTRACE_OUTPUT: OPENCL_API calls + device activity),
             what `offtrace record` does for an OpenCL program
  record-compare  with --compare-layer PATH: `record` with another build of the layer (a build of
             main, say), interleaved with this one's, for a before/after in one run
  intercept  with --cliloader PATH: Intel's opencl-intercept-layer recording the closest thing to a
             trace it makes (`cliloader -q -ccl -cdt`: every call and every command's device time
             into a Chrome JSON file)

Each run prints ns per kernel (N small kernels enqueued on one in-order queue + clFinish) and ns
per cheap call (clGetDeviceInfo(CL_DEVICE_TYPE)); the table gives the median and the minimum over
the rounds, and each configuration's overhead against `plain` (by medians and by minimums).
Needs scripts/setup-opencl.sh; `intel` needs the SYCL venv ($OFFTRACE_SYCL_VENV, default .venv).
The layer is target/release/libofftrace_opencl.so (cargo build --release -p offtrace-opencl).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

root = Path(__file__).resolve().parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("--kernels", type=int, default=20000)
ap.add_argument("--calls", type=int, default=1000000)
ap.add_argument("--items", type=int, default=64, help="work items per kernel")
ap.add_argument("--runtime", default="both", choices=["pocl", "intel", "both"])
ap.add_argument("--cliloader", help="opencl-intercept-layer's cliloader (built from its sources)")
ap.add_argument("--compare-layer", help="another libofftrace_opencl.so, recorded as `record-compare`")
opts = ap.parse_args()

layer = root / "target/release/libofftrace_opencl.so"
if not layer.exists():
    sys.exit(f"opencl-overhead: {layer} missing: cargo build --release -p offtrace-opencl")
tmp = Path(tempfile.mkdtemp(prefix="offtrace-ocl-overhead-"))
exe = tmp / "many_kernels"
subprocess.run(["cc", "-O2", str(root / "examples/opencl/many_kernels.c"), "-lOpenCL", "-o", str(exe)], check=True)

venv = Path(os.environ.get("OFFTRACE_SYCL_VENV", root / ".venv"))
runtimes = {
    "pocl": {"OFFTRACE_CL_PLATFORM": "Portable"},
    "intel": {"OFFTRACE_CL_PLATFORM": "Intel", "LD_LIBRARY_PATH": str(venv / "lib"),
              "OCL_ICD_FILENAMES": str(venv / "lib/libintelocl.so")},
}
configs = (["plain", "profiling", "events", "layer", "record"] + (["record-compare"] if opts.compare_layer else [])
           + (["intercept"] if opts.cliloader else []))


def run(rt, cfg):
    env = dict(os.environ, **runtimes[rt])
    args = [str(exe), "--kernels", str(opts.kernels), "--calls", str(opts.calls), "--items", str(opts.items)]
    if cfg == "profiling":
        args.append("--profile")
    if cfg == "events":
        args += ["--profile", "--events"]
    if cfg in ("layer", "record"):
        env["OPENCL_LAYERS"] = str(layer)
    if cfg == "record-compare":
        env["OPENCL_LAYERS"] = opts.compare_layer
    if cfg in ("record", "record-compare"):
        env["OFFTRACE_OUTPUT"] = str(tmp / f"{rt}.offtrace")
        # A trace already there would be kept and this run's written beside it (`<path>.<pid>`).
        if os.path.exists(env["OFFTRACE_OUTPUT"]):
            os.remove(env["OFFTRACE_OUTPUT"])
    if cfg == "intercept":
        env["CLI_DumpDir"] = str(tmp / f"cli-{rt}")
        if rt == "intel":  # the intercept library loads this loader (the venv's Khronos one)
            env["CLI_OpenCLFileName"] = str(venv / "lib/libOpenCL.so.1")
        args = [opts.cliloader, "-q", "-ccl", "-cdt"] + args
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True).stdout.split("\n")
    per_kernel = float(out[0].split(": ")[1].split()[0])
    per_call = float(out[1].split(": ")[1].split()[0])
    return per_kernel, per_call


def measure(rt):
    res = {c: ([], []) for c in configs}
    for _ in range(opts.rounds):
        for c in configs:
            k, call = run(rt, c)
            res[c][0].append(k)
            res[c][1].append(call)
    base_k = statistics.median(res["plain"][0])
    base_min = min(res["plain"][0])
    base_c = statistics.median(res["plain"][1])
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} after the runs")
    print(f"\n{rt}: {opts.kernels} kernels of {opts.items} work items, {opts.calls} calls, {opts.rounds} rounds (median / min)\n")
    print("| configuration | ns per kernel | vs plain (medians / minimums) | ns per clGetDeviceInfo | vs plain |")
    print("|---|---|---|---|---|")
    for c in configs:
        k, call = res[c]
        mk, mc = statistics.median(k), statistics.median(call)
        print(f"| {c} | {mk:.0f} / {min(k):.0f} | {100 * (mk / base_k - 1):+.1f} % / {100 * (min(k) / base_min - 1):+.1f} % "
              f"| {mc:.1f} / {min(call):.1f} | {mc - base_c:+.1f} ns |")


try:
    for rt in (["pocl", "intel"] if opts.runtime == "both" else [opts.runtime]):
        measure(rt)
finally:
    # The program and the traces (a trace of a 200,000-kernel run is several MB).
    shutil.rmtree(tmp, ignore_errors=True)
