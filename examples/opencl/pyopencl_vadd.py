"""pyopencl_vadd: a plain pyopencl program (no offtrace code) used to check the OpenCL layer.

    python pyopencl_vadd.py [--profile] [--iters N] [--platform SUBSTRING]
    OPENCL_LAYERS=$PWD/target/debug/libofftrace_opencl.so python pyopencl_vadd.py

Enqueues 2 host->device copies, 1 fill, N kernels, 1 device->device copy and 1 device->host
copy, checks the result, and prints what it enqueued; with --profile it prints each command's
END - START as the program reads it from its events. Exit status: 0 ok, 2 no platform, 3 wrong.
"""
import argparse
import os
import sys

import numpy as np
import pyopencl as cl

ap = argparse.ArgumentParser()
ap.add_argument("--profile", action="store_true")
ap.add_argument("--iters", type=int, default=5)
ap.add_argument("--platform", default=os.environ.get("OFFTRACE_CL_PLATFORM"))
args = ap.parse_args()

platforms = [p for p in cl.get_platforms() if not args.platform or args.platform in p.name]
if not platforms:
    print(f"pyopencl_vadd: no OpenCL platform matching {args.platform!r}", file=sys.stderr)
    sys.exit(2)
platform = platforms[0]
device = platform.get_devices()[0]
ctx = cl.Context([device])
props = cl.command_queue_properties.PROFILING_ENABLE if args.profile else 0
queue = cl.CommandQueue(ctx, device, properties=props)

prg = cl.Program(ctx, """
__kernel void axpy(__global const float* x, __global float* y, float a) {
    size_t i = get_global_id(0);
    y[i] = a * x[i] + y[i];
}
""").build()
axpy = cl.Kernel(prg, "axpy")

n = 1 << 15
x = np.arange(n, dtype=np.float32)
y = np.ones(n, dtype=np.float32)
mf = cl.mem_flags
dx = cl.Buffer(ctx, mf.READ_ONLY, x.nbytes)
dy = cl.Buffer(ctx, mf.READ_WRITE, y.nbytes)
dz = cl.Buffer(ctx, mf.READ_WRITE, y.nbytes)
events = []
events.append(("copy", cl.enqueue_copy(queue, dx, x)))
events.append(("copy", cl.enqueue_copy(queue, dy, y)))
events.append(("fill", cl.enqueue_fill_buffer(queue, dz, np.float32(0), 0, y.nbytes)))
axpy.set_args(dx, dy, np.float32(2.0))
for _ in range(args.iters):
    events.append(("kernel", cl.enqueue_nd_range_kernel(queue, axpy, (n,), None)))
events.append(("copy", cl.enqueue_copy(queue, dz, dy)))
out = np.empty_like(y)
events.append(("copy", cl.enqueue_copy(queue, out, dz)))
queue.finish()

expected = 1.0 + args.iters * 2.0 * x
ok = np.allclose(out, expected)
print(f"pyopencl_vadd: platform {platform.name!r}, {n} elements, {'ok' if ok else 'WRONG'}")
print(f"enqueued kernels={args.iters} copies=4 fills=1")
if args.profile:
    for i, (what, ev) in enumerate(events):
        print(f"profile {what} {i} {ev.profile.end - ev.profile.start}")
sys.exit(0 if ok else 3)
