"""The PyTorch workload of offtrace's GPU tests: a small transformer's training step (AdamW) and
a CUDA-graph-captured inference step, with NVTX ranges. The work it launches is the same on
every run (fixed seeds, fixed shapes, deterministic algorithms where PyTorch has them).

    python train.py [--steps N] [--warmup W] [--profile torch|none] [--size base|small] [--out FILE.json]
                    [--ab PHASES --ab-rounds R --ab-block B]

Each step: NVTX range "step" > "train" (forward, loss, backward, AdamW) and "infer" (one replay
of the captured graph); `torch.cuda.synchronize()` closes the step, so the step's wall time
is its whole cost. The measured window (after the warm-up) is wrapped in the NVTX range
"window" with a synchronize on both sides: every kernel of the window runs inside it, which
lets the test pick the same steps out of an offtrace trace that `--profile torch` profiles.

`--ab 0,1,2` (under `offtrace record`): instead of --steps, R rounds of the phases in a rotated
order; each phase switches offtrace's CUPTI subscription (`offtrace_cuda_measure_phase` of the
injection: 0 nothing traced, 1 the default, ...), runs one step to settle, then B timed steps.
The steps of one process under each phase ("ab_step_ns") compare the parts of the tracer
without the process-to-process differences of the host.

Writes a JSON summary: per-step wall times (ns) of the window, and with `--profile torch` the
profiler's Chrome trace next to it (FILE.torch.json).
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn


# (d_model, heads, feed-forward, layers, batch, sequence): "small" is launch-bound (the CPU
# issuing kernels is the step's critical path), "base" keeps the GPU busy for most of the step.
SIZES = {"small": (256, 4, 1024, 2, 16, 64), "base": (512, 8, 2048, 4, 32, 128)}


def thread_cpu():
    """Per thread of this process: (name, CPU ticks user+system, last CPU, involuntary switches),
    from /proc (what `top -H` shows), to see which threads a tracer adds and what they cost."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                st = f.read()
            with open(f"/proc/self/task/{tid}/status") as f:
                nvcs = [ln for ln in f if ln.startswith("nonvoluntary_ctxt_switches")]
        except OSError:
            continue
        name = st[st.index("(") + 1 : st.rindex(")")]
        rest = st[st.rindex(")") + 2 :].split()
        # Fields after the name start at 3 (state): utime 14, stime 15, processor 39.
        out[tid] = (name, int(rest[11]) + int(rest[12]), int(rest[36]), int(nvcs[0].split()[1]) if nvcs else 0)
    return out


def build(device, size):
    d, h, ff, n, _, _ = SIZES[size]
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=d, nhead=h, dim_feedforward=ff, dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(layer, num_layers=n, enable_nested_tensor=False), nn.Linear(d, d))
    return model.to(device)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--profile", choices=["none", "torch"], default="none")
    ap.add_argument("--out", default="")
    ap.add_argument("--size", choices=sorted(SIZES), default="base")
    ap.add_argument("--ab", default="")
    ap.add_argument("--ab-rounds", type=int, default=8)
    ap.add_argument("--ab-block", type=int, default=4)
    args = ap.parse_args()

    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    d, _, _, _, batch, seq = SIZES[args.size]
    model = build(dev, args.size)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True, capturable=False)
    g = torch.Generator(device="cpu").manual_seed(1)
    x_cpu = torch.randn(batch, seq, d, generator=g)
    t_cpu = torch.randn(batch, seq, d, generator=g)
    x = x_cpu.to(dev)  # one HtoD copy each, before the window
    target = t_cpu.to(dev)

    # The inference step, captured once into a CUDA graph (warm-up on a side stream, as
    # torch.cuda.graphs requires).
    infer_model = build(dev, args.size).eval()
    static_in = torch.randn(batch // 2, seq, d, generator=g).to(dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            infer_model(static_in)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        static_out = infer_model(static_in)

    # When each step's last launch returned (before its closing synchronize): a step whose
    # issue time is close to its wall time is launch-bound (the CPU is the critical path).
    issued = []

    def step(i):
        torch.cuda.nvtx.range_push("step")
        torch.cuda.nvtx.range_push("train")
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = nn.functional.mse_loss(out, target)
        loss.backward()
        opt.step()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("infer")
        graph.replay()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
        issued.append(time.perf_counter_ns())
        torch.cuda.synchronize()
        return loss

    for i in range(args.warmup):
        step(i)
    torch.cuda.synchronize()

    prof = None
    if args.profile == "torch":
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CUDA])
        prof.__enter__()
    torch.cuda.synchronize()
    # The speed of this process's CPU: a fixed pure-Python loop, timed (a process placed on a
    # slower or shared core shows it here, with or without a tracer).
    t0 = time.perf_counter_ns()
    acc = 0
    for k in range(200_000):
        acc += k * k
    cpu_probe_ns = time.perf_counter_ns() - t0
    threads0 = thread_cpu()
    torch.cuda.nvtx.range_push("window")
    times = []
    issue = []
    ab = {}
    if args.ab:
        import ctypes

        # The injection the CUDA driver loaded (offtrace record names it): not a second copy.
        lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"], mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        set_phase = lib.offtrace_cuda_measure_phase
        set_phase.argtypes = [ctypes.c_uint32]
        phases = [int(p) for p in args.ab.split(",")]
        ab = {str(p): [] for p in phases}
        ab_issue = {str(p): [] for p in phases}
        for r in range(args.ab_rounds):
            k = r % len(phases)
            for p in phases[k:] + phases[:k]:
                if set_phase(p) != 0:
                    raise SystemExit(f"offtrace_cuda_measure_phase({p}) failed")
                step(0)  # settles after the switch; not timed
                for _ in range(args.ab_block):
                    t0 = time.perf_counter_ns()
                    issued.clear()
                    loss = step(0)
                    ab[str(p)].append(time.perf_counter_ns() - t0)
                    ab_issue[str(p)].append(issued[0] - t0)
                    times.append(ab[str(p)][-1])
                    issue.append(issued[0] - t0)
        set_phase(1)
    for i in range(0 if args.ab else args.steps):
        t0 = time.perf_counter_ns()
        issued.clear()
        loss = step(i)
        times.append(time.perf_counter_ns() - t0)
        issue.append(issued[0] - t0)
    # One DtoH copy inside the window, after the last step: the loss value.
    final_loss = loss.item()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    threads1 = thread_cpu()
    if prof is not None:
        prof.__exit__(None, None, None)
    # CPU ticks (1/100 s) each thread used during the window, by thread name; the main
    # thread's CPU at the end and its involuntary context switches in the window.
    window_threads = {}
    for tid, (name, ticks, cpu, nvcs) in threads1.items():
        t0 = threads0.get(tid, (name, 0, cpu, 0))
        key = "main" if int(tid) == os.getpid() else name
        e = window_threads.setdefault(key, {"ticks": 0, "threads": 0, "cpus": [], "nvcs": 0})
        e["ticks"] += ticks - t0[1]
        e["threads"] += 1
        e["cpus"].append(cpu)
        e["nvcs"] += nvcs - t0[3]
    result = {
        "steps": args.steps,
        "warmup": args.warmup,
        "profile": args.profile,
        "size": args.size,
        "step_ns": times,
        "loss": final_loss,
        "graph_out_sum": float(static_out.double().sum().item()),
        "pid": os.getpid(),
        "threads": window_threads,
        "issue_ns": issue,
        "cpu_probe_ns": cpu_probe_ns,
        # The placement the process ran under (taskset) and PyTorch's intra-op thread count.
        "affinity": sorted(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
    }
    if ab:
        result["ab_step_ns"] = ab
        result["ab_issue_ns"] = ab_issue
        result["ab_block"] = args.ab_block
    if args.out:
        if prof is not None:
            prof.export_chrome_trace(args.out + ".torch.json")
        with open(args.out, "w") as f:
            json.dump(result, f)
    print(json.dumps({k: v for k, v in result.items() if k != "step_ns"}))


if __name__ == "__main__":
    main()
