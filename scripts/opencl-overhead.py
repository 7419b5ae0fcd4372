#!/usr/bin/env python3
"""The OpenCL layer's overhead, measured side by side in one run.

usage: scripts/opencl-overhead.py [--rounds N] [--kernels N] [--calls N] [--runtime pocl|intel|both]
                                  [--items W] [--measure wall|callgrind|cpu] [--chrt] [--out-of-order]

Builds examples/opencl/many_kernels.c, then runs it in rounds, the configurations interleaved
(so that the machine's load drifts over all of them alike). The configurations of one in-order
queue (docs/overhead.md, "OpenCL layer"):

  plain      no layer
  profiling  no layer, the queue created with CL_QUEUE_PROFILING_ENABLE (the runtime's own profiling)
  events     `profiling`, and the program asks for each kernel's event (released right after the
             enqueue): what an event with profiling costs the runtime, the floor of any tracer
             that reads device times from events (released at once: the runtime frees it later,
             on its own threads, which only `--measure callgrind|cpu` count)
  query      `profiling`, and the program keeps each kernel's event, reads its START and END after
             completion (in batches of 1,024) and releases it (`--query`): what any tracer that
             reports a device time for every kernel makes the runtime do, the floor
  batched    no layer; the program waits as `query` does (a marker after every 1,024 kernels, the
             previous one waited for) without any kernel's event (`--batched`): the same queue
             depth as `query`, its baseline by time (on a program that enqueues everything
             before one clFinish the backlog itself costs the runtimes more than those waits)
  layer      the layer loaded, nothing listening (profiling forced on and hidden; no callbacks)
  record     the layer recording a trace (OFFTRACE_OUTPUT: OPENCL_API calls + device activity),
             what `offtrace record` does for an OpenCL program
  record-compare  with --compare-layer PATH: `record` with another build of the layer (a build of
             main, say), interleaved with this one's, for a before/after in one run
  intercept  with --cliloader PATH: Intel's opencl-intercept-layer recording the closest thing to a
             trace it makes (`cliloader -q -ccl -cdt`: every call and every command's device time
             into a Chrome JSON file)

With --out-of-order, what recording costs a program whose kernels go to an out-of-order queue,
beside the same program on an in-order queue (docs/overhead.md, "OpenCL out-of-order queues"); the
kernel is the atomic_inc one on both queues (`--atomic`, implied by `--out-of-order`), and no
cheap calls are timed (--calls defaults to 0):

  plain-in-order   no layer, in-order queue (`--atomic`)
  plain-ooo        no layer, out-of-order queue (`--out-of-order`)
  events-ooo       plain-ooo, the queue profiled and each kernel's event asked for and released
                   (`--profile --events`): the runtime's own floor of a tracer that reads events
  record-in-order  the layer recording a trace (OFFTRACE_OUTPUT), in-order queue
  record-ooo       the layer recording a trace, out-of-order queue: every command goes to the
                   layer's unordered list, which its harvest thread polls (one status query per
                   outstanding command, at most 1024 per round, a round each millisecond)

Each configuration is compared with its baseline: `plain`, or with --out-of-order the plain
configuration of its queue.

Each run prints ns per kernel (N small kernels enqueued on one queue + clFinish) and ns per cheap
call (clGetDeviceInfo(CL_DEVICE_TYPE)); the script also times the whole process (start-up, the
program's build, the layer's harvest of what clFinish left, the writer's end and the exit
included). The table gives the median and the minimum over the rounds, each configuration's
overhead against its baseline (by medians and by minimums), and the process's difference to its
baseline in ns per kernel (by medians).
--measure callgrind counts the whole process (all threads) under callgrind at --kernels and
3 x --kernels (default here 1,000 and 3,000) and gives instructions per kernel = the difference /
(2 x --kernels): the median and the range over the rounds, and the median against its baseline's
(PoCL's worker threads spin for a timing-dependent while, so the plain rows move too).
--measure cpu does the same with the CPU time (user + sys, all threads, RUSAGE_CHILDREN) of two runs
of --kernels and 3 x --kernels, with the program's own wall time per kernel beside it (for Intel's
runtime, where callgrind is unusable); --chrt runs every program under `chrt -f 10`.

Needs scripts/setup-opencl.sh; `intel` needs the SYCL venv ($OFFTRACE_SYCL_VENV, default .venv).
The layer is target/release/libofftrace_opencl.so (cargo build --release -p offtrace-opencl).
"""
import argparse
import os
import resource
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
ap.add_argument("--kernels", type=int, default=20000)
ap.add_argument("--calls", type=int, help="cheap calls timed (default 1,000,000; 0 with --out-of-order)")
ap.add_argument("--items", type=int, default=64, help="work items per kernel")
ap.add_argument("--runtime", default="both", choices=["pocl", "intel", "both"])
ap.add_argument("--cliloader", help="opencl-intercept-layer's cliloader (built from its sources)")
ap.add_argument("--compare-layer", help="another libofftrace_opencl.so, recorded as `record-compare`")
ap.add_argument("--layer", help="the layer to measure (default target/release/libofftrace_opencl.so)")
ap.add_argument("--measure", default="wall", choices=["wall", "callgrind", "cpu"])
ap.add_argument("--chrt", action="store_true", help="run every program under chrt -f 10")
ap.add_argument("--configs", help="comma-separated subset of the configurations")
ap.add_argument("--out-of-order", action="store_true",
                help="the out-of-order configurations, each beside its in-order counterpart")
opts = ap.parse_args()
if opts.measure == "callgrind" and "--kernels" not in sys.argv:
    opts.kernels = 1000
if opts.calls is None:
    opts.calls = 0 if opts.out_of_order else 1000000

layer = Path(opts.layer) if opts.layer else root / "target/release/libofftrace_opencl.so"
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
# Each configuration: the program's arguments, and the configuration it is compared with.
if opts.out_of_order:
    programs = {
        "plain-in-order": (["--atomic"], "plain-in-order"),
        "plain-ooo": (["--out-of-order"], "plain-ooo"),
        "events-ooo": (["--out-of-order", "--profile", "--events"], "plain-ooo"),
        "record-in-order": (["--atomic"], "plain-in-order"),
        "record-ooo": (["--out-of-order"], "plain-ooo"),
        "record-compare-in-order": (["--atomic"], "plain-in-order"),
        "record-compare-ooo": (["--out-of-order"], "plain-ooo"),
    }
    configs = ["plain-in-order", "plain-ooo", "events-ooo", "record-in-order", "record-ooo"] + (
        ["record-compare-in-order", "record-compare-ooo"] if opts.compare_layer else [])
else:
    programs = {
        "plain": ([], "plain"),
        "profiling": (["--profile"], "plain"),
        "events": (["--profile", "--events"], "plain"),
        "query": (["--query"], "plain"),
        "batched": (["--batched"], "plain"),
        "layer": ([], "plain"),
        "record": ([], "plain"),
        "record-compare": ([], "plain"),
        "intercept": ([], "plain"),
    }
    configs = (["plain", "profiling", "events", "query", "batched", "layer", "record"] + (["record-compare"] if opts.compare_layer else [])
               + (["intercept"] if opts.cliloader else []))
if opts.configs:
    configs = [c for c in opts.configs.split(",") if c in configs]
    # A configuration is measured with its baseline.
    configs = [c for c in programs if c in configs or any(programs[x][1] == c for x in configs)]


def baseline(cfg):
    return programs[cfg][1]


def run(rt, cfg, kernels=None):
    """One run: (ns per kernel, ns per call, the whole process's wall ns) by wall; with --measure
    callgrind|cpu the third value is the whole process's instructions (cpu: its wall ns, the CPU
    time is taken around it)."""
    env = dict(os.environ, **runtimes[rt])
    args = [str(exe), "--kernels", str(kernels or opts.kernels), "--calls", str(opts.calls), "--items", str(opts.items)]
    args += programs[cfg][0]
    # `layer`, `record*`: this build of the layer; `record-compare*`: the other one.
    if cfg == "layer" or cfg.startswith("record"):
        env["OPENCL_LAYERS"] = opts.compare_layer if cfg.startswith("record-compare") else str(layer)
    if cfg.startswith("record"):
        env["OFFTRACE_OUTPUT"] = str(tmp / f"{rt}-{cfg}.offtrace")
        # A trace already there would be kept and this run's written beside it (`<path>.<pid>`).
        if os.path.exists(env["OFFTRACE_OUTPUT"]):
            os.remove(env["OFFTRACE_OUTPUT"])
    if cfg == "intercept":
        env["CLI_DumpDir"] = str(tmp / f"cli-{rt}")
        if rt == "intel":  # the intercept library loads this loader (the venv's Khronos one)
            env["CLI_OpenCLFileName"] = str(venv / "lib/libOpenCL.so.1")
        args = [opts.cliloader, "-q", "-ccl", "-cdt"] + args
    cg = tmp / "callgrind.out"
    if opts.measure == "callgrind":
        # cliloader execs the program: follow it (its count is the last one valgrind prints).
        follow = ["--trace-children=yes"] if cfg == "intercept" else []
        args = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}.%p"] + follow + args
    if opts.chrt:
        args = ["chrt", "-f", "10"] + args
    t0 = time.monotonic_ns()
    p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = p.communicate()
    process_ns = time.monotonic_ns() - t0
    if p.returncode != 0:
        sys.exit(f"opencl-overhead: {cfg} failed ({p.returncode}): {stderr[-2000:]}")
    out = stdout.split("\n")
    per_kernel = float(out[0].split(": ")[1].split()[0])
    per_call = float(out[1].split(": ")[1].split()[0])
    if opts.measure == "callgrind":
        total = int([l for l in stderr.split("\n") if "Collected :" in l][-1].split(":")[1])
        for f in tmp.glob(f"{cg.name}.*"):
            f.unlink()
        return per_kernel, per_call, total
    return per_kernel, per_call, process_ns


def run_cpu(rt, cfg, kernels):
    """--measure cpu: the whole process's CPU ns (user + sys, all threads) and its wall per kernel."""
    start = resource.getrusage(resource.RUSAGE_CHILDREN)
    k, call, _ = run(rt, cfg, kernels)
    end = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime) * 1e9
    return k, call, cpu


def measure_per_kernel(rt):
    """--measure callgrind|cpu: per kernel = (count at 3N - count at N) / 2N, N = --kernels."""
    lo, hi = opts.kernels, 3 * opts.kernels
    res = {c: ([], []) for c in configs}  # per-kernel count, wall ns per kernel at 3N
    for _ in range(opts.rounds):
        for c in configs:
            if opts.measure == "callgrind":
                a, b = run(rt, c, lo)[2], run(rt, c, hi)
                res[c][0].append((b[2] - a) / (hi - lo))
            else:
                a, b = run_cpu(rt, c, lo)[2], run_cpu(rt, c, hi)
                res[c][0].append((b[2] - a) / (hi - lo))
            res[c][1].append(b[0])
    load = os.getloadavg()
    unit = "instructions (Ir, all threads)" if opts.measure == "callgrind" else "CPU ns (user + sys, all threads)"
    print(f"\nload average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} after the runs")
    print(f"\n{rt}: {unit} per kernel = (at {hi} - at {lo} kernels) / {hi - lo}, {opts.items} work items, "
          f"{opts.rounds} rounds{', chrt -f 10' if opts.chrt else ''}\n")
    print("| configuration | per kernel: median (min-max) | vs its baseline (medians) | wall ns per kernel at "
          f"{hi}: median | vs its baseline |")
    print("|---|---|---|---|---|")
    for c in configs:
        v, w = res[c]
        m, mw = statistics.median(v), statistics.median(w)
        b = baseline(c)
        base = statistics.median(res[b][0]) if b in res else None
        base_w = statistics.median(res[b][1]) if b in res else None
        rel = f"{m - base:+.0f} = {100 * (m / base - 1):+.1f} % ({b})" if base else ""
        relw = f"{100 * (mw / base_w - 1):+.1f} %" if base_w else ""
        print(f"| {c} | {m:.0f} ({min(v):.0f}-{max(v):.0f}) | {rel} | {mw:.0f} | {relw} |")
    print("\nruns: " + "; ".join(f"{c}: " + " ".join(f"{x:.0f}" for x in res[c][0]) for c in configs))


def measure(rt):
    res = {c: ([], [], []) for c in configs}  # ns per kernel, ns per call, process ns
    for _ in range(opts.rounds):
        for c in configs:
            for into, v in zip(res[c], run(rt, c)):
                into.append(v)
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} after the runs")
    print(f"\n{rt}: {opts.kernels} kernels of {opts.items} work items, {opts.calls} calls, {opts.rounds} rounds (median / min)\n")
    calls = " ns per clGetDeviceInfo | vs its baseline |" if opts.calls else ""
    print(f"| configuration | ns per kernel | vs its baseline (medians / minimums) |{calls} process, ms "
          "| process vs its baseline, ns per kernel (medians) |")
    print("|---|---|---|---|---|" + ("---|---|" if opts.calls else ""))
    for c in configs:
        k, call, proc = res[c]
        bk, bc, bp = res[baseline(c)]
        mk, mc, mp = statistics.median(k), statistics.median(call), statistics.median(proc)
        row = (f"| {c} | {mk:.0f} / {min(k):.0f} | {100 * (mk / statistics.median(bk) - 1):+.1f} % / "
               f"{100 * (min(k) / min(bk) - 1):+.1f} % |")
        if opts.calls:
            row += f" {mc:.1f} / {min(call):.1f} | {mc - statistics.median(bc):+.1f} ns |"
        row += (f" {mp / 1e6:.1f} / {min(proc) / 1e6:.1f} | "
                f"{(mp - statistics.median(bp)) / opts.kernels:+.0f} |")
        print(row)


try:
    for rt in (["pocl", "intel"] if opts.runtime == "both" else [opts.runtime]):
        measure(rt) if opts.measure == "wall" else measure_per_kernel(rt)
finally:
    # The program and the traces (a trace of a 200,000-kernel run is several MB).
    shutil.rmtree(tmp, ignore_errors=True)
