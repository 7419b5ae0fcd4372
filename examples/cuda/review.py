"""What PyTorch users run daily, for checking offtrace's CUDA traces against what the program did
and against torch.profiler (docs/cuda.md, "torch.compile, several streams and the caching allocator"):

1. torch.compile: a LayerNorm + MLP block compiled by Inductor (Triton kernels loaded at run
   time through the driver API and launched with cuLaunchKernel[Ex]), forward and backward.
2. Several streams: per step, a non_blocking HtoD copy from pinned memory on a copy stream while
   matmuls run on a compute stream, an event orders the compute stream's use of the copied data,
   and a non_blocking DtoH copy into pinned memory goes back on the copy stream.
3. The caching allocator: tensors allocated and freed, `empty_cache`; what torch.cuda says about
   its segments (cudaMalloc / cudaFree) and peaks, to hold against the trace's allocations.

    python review.py [--steps N] [--warmup W] [--profile torch|none] [--out FILE.json]

Parts 1 and 2 run in the NVTX range "window" (a synchronize on both sides; `--profile torch`
profiles exactly that window), part 3 after it. Prints (and writes to --out) what it ran: the
window's copies by direction and bytes, matmuls per stream, the allocator's statistics.
"""
import argparse
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

COPY_BYTES = 32 << 20  # each pinned copy, both directions
MATMULS = 4  # per step on the compute stream
BIG = (256 << 20, 512 << 20)  # part 3: two tensors of these sizes (bytes)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--profile", choices=["none", "torch"], default="none")
    ap.add_argument("--out", default="")
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(0)
    result = {"steps": args.steps, "warmup": args.warmup, "profile": args.profile}

    # 1. torch.compile (Inductor -> Triton); the first calls compile, outside the window.
    block = Block(512).to(dev)
    opt = torch.optim.SGD(block.parameters(), lr=1e-3, foreach=True)
    x = torch.randn(64, 128, 512, device=dev)
    compiled = None
    if not args.no_compile:
        try:
            compiled = torch.compile(block)
            compiled(x).square().mean().backward()
            torch.cuda.synchronize()
            result["compile"] = "ok"
        except Exception as e:  # no Triton or no host compiler on this machine
            compiled = None
            result["compile"] = f"unavailable: {type(e).__name__}: {str(e)[:300]}"
    else:
        result["compile"] = "off"

    # 2. Streams: pinned host buffers, a copy stream and a compute stream.
    s_copy, s_comp = torch.cuda.Stream(), torch.cuda.Stream()
    h_in = torch.randn(COPY_BYTES // 4).pin_memory()
    h_out = torch.empty(COPY_BYTES // 4).pin_memory()
    with torch.cuda.stream(s_comp):
        a = torch.randn(2048, 2048, device=dev)
        b = torch.randn(2048, 2048, device=dev)
        c = torch.empty(2048, 2048, device=dev)
        d_in = torch.empty(COPY_BYTES // 4, device=dev)
        y = torch.empty(COPY_BYTES // 4, device=dev)
    torch.cuda.synchronize()
    main_stream = torch.cuda.current_stream()
    # CUDA's stream handles as PyTorch holds them (the trace names streams by CUPTI's ids).
    result["streams"] = {"default": main_stream.cuda_stream, "copy": s_copy.cuda_stream, "compute": s_comp.cuda_stream}

    def step():
        if compiled is not None:
            opt.zero_grad(set_to_none=True)
            compiled(x).square().mean().backward()
            opt.step()
        s_copy.wait_stream(main_stream)
        s_comp.wait_stream(main_stream)
        with torch.cuda.stream(s_copy):
            d_in.copy_(h_in, non_blocking=True)  # HtoD, pinned -> device
            copied = torch.cuda.Event()
            copied.record(s_copy)
        with torch.cuda.stream(s_comp):
            for _ in range(MATMULS):  # overlaps the copy: nothing orders them
                torch.mm(a, b, out=c)
            s_comp.wait_event(copied)
            torch.mul(d_in, 2.0, out=y)
        s_copy.wait_stream(s_comp)
        with torch.cuda.stream(s_copy):
            h_out.copy_(y, non_blocking=True)  # DtoH, device -> pinned
        main_stream.wait_stream(s_copy)

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    prof = None
    if args.profile == "torch":
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CUDA])
        prof.__enter__()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("window")
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    if prof is not None:
        prof.__exit__(None, None, None)
        if args.out:
            prof.export_chrome_trace(args.out + ".torch.json")
    ok = bool(torch.equal(h_out, h_in * 2.0))
    result["window"] = {
        "htod_pinned": {"count": args.steps, "bytes": COPY_BYTES},
        "dtoh_pinned": {"count": args.steps, "bytes": COPY_BYTES},
        "matmuls_on_compute_stream": args.steps * MATMULS,
        "mul_on_compute_stream": args.steps,
        "copies_on_copy_stream": 2 * args.steps,
        "result_ok": ok,
    }

    # 3. The caching allocator: two big tensors (each its own cudaMalloc'd segment), freed to the
    # cache (no cudaFree), then empty_cache (cudaFree of every unused segment).
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()
    t1 = torch.empty(BIG[0], dtype=torch.uint8, device=dev)
    t2 = torch.empty(BIG[1], dtype=torch.uint8, device=dev)
    peak_live_tensors = torch.cuda.memory_allocated()
    del t1, t2
    after_del = torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    st = torch.cuda.memory_stats()
    keys = ["segment.all.allocated", "segment.all.freed", "segment.all.current", "reserved_bytes.all.peak",
            "reserved_bytes.all.current", "allocated_bytes.all.peak", "allocated_bytes.all.current",
            "allocation.all.allocated", "num_alloc_retries", "num_device_alloc", "num_device_free"]
    result["allocator"] = {
        "stats": {k: st.get(k) for k in keys},
        "part3_new_segments": st["segment.all.allocated"] - before["segment.all.allocated"],
        "part3_freed_segments": st["segment.all.freed"] - before["segment.all.freed"],
        "memory_allocated_with_both": peak_live_tensors,
        "memory_reserved_after_del": after_del,
        "memory_reserved_end": torch.cuda.memory_reserved(),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "pinned_host_buffers": 2,
        "pinned_host_bytes_each": COPY_BYTES,
        "host_allocator": {k: v for k, v in torch.cuda.host_memory_stats().items()
                           if k.startswith(("num_host_alloc", "num_host_free", "allocated_bytes", "reserved_bytes"))}
        if hasattr(torch.cuda, "host_memory_stats") else None,
    }
    result["pid"] = os.getpid()
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
