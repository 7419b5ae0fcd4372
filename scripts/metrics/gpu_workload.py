"""A PyTorch run with phases the telemetry must show: idle, compute-bound bf16 matrix products,
idle, memory-bound copies, idle. Prints each phase's CLOCK_MONOTONIC start/end (ns) and the
wall-clock offset, so telemetry from different tools can be put on one clock."""
import sys
import time

import torch

def phase(name, seconds, body):
    t0 = time.monotonic_ns()
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        if body is not None:
            body()
            n += 1
        else:
            time.sleep(0.01)
    torch.cuda.synchronize()
    print(f"phase {name} {t0} {time.monotonic_ns()} {n}", flush=True)

print(f"clock_offset_ns {time.time_ns() - time.monotonic_ns()}", flush=True)
dev = torch.device("cuda")
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
x = torch.empty(1 << 30, device=dev, dtype=torch.uint8)
y = torch.empty_like(x)
torch.cuda.synchronize()
secs = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0

def mm():
    for _ in range(8):
        a @ b
    torch.cuda.synchronize()

def copy():
    for _ in range(8):
        y.copy_(x)
    torch.cuda.synchronize()

phase("idle0", secs / 2, None)
phase("matmul", secs, mm)
phase("idle1", secs / 2, None)
phase("copy", secs, copy)
phase("idle2", secs / 2, None)
