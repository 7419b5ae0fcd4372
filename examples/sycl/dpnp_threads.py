"""Three threads, each with its own queue, and one in-order queue that threads 0 and 1 share.

Per thread and round: a kernel of the program's own (dpctl.program, OpenCL C) on its queue, a
dpnp reduction (sum, max), a sort, dpnp.linalg.norm and dpnp.linalg.solve; threads 0 and 1 also
submit a kernel to the shared queue. Prints what it submitted, `count KERNEL N` per
dpctl.program kernel, then `dpnp_threads: ok`.

    python dpnp_threads.py [ROUNDS]      (default 3)

Uses Intel's OpenCL CPU device when it is visible (OCL_ICD_FILENAMES=<venv>/lib/libintelocl.so),
else the first OpenCL device.
"""
import collections
import ctypes
import sys
import threading

import numpy as np
import dpctl
import dpctl.memory as dpm
import dpctl.program as dpp
import dpnp

SRC = """
__kernel void twice(__global float *x) { size_t i = get_global_id(0); x[i] = 2.0f * x[i]; }
__kernel void inc_shared(__global float *x, float v) { size_t i = get_global_id(0); x[i] += v; }
"""
N, THREADS = 4096, 3
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
devs = dpctl.get_devices(backend="opencl")
dev = next((d for d in devs if "pthread" not in d.name), devs[0])
ctx = dpctl.SyclContext(dev)
own = [dpctl.SyclQueue(ctx, dev) for _ in range(THREADS)]
shared = dpctl.SyclQueue(ctx, dev, property="in_order")
prog = dpp.create_program_from_source(shared, SRC)
k_twice, k_inc = prog.get_sycl_kernel("twice"), prog.get_sycl_kernel("inc_shared")
sh = dpm.MemoryUSMDevice(N * 4, queue=shared)
shared.memcpy(sh, np.zeros(N, dtype=np.float32), N * 4)
# dpctl's order keeper (dpctl.utils._seq_order_keeper) initialises a C++ static that gives up the
# GIL: threads that make their first dpnp call at once can deadlock there, with or without
# offtrace. Every dpnp operation the threads use runs once here first.
w = dpnp.arange(8, 0, -1, dtype=dpnp.float32, sycl_queue=shared)
float(dpnp.sum(w)), float(dpnp.max(w)), dpnp.sort(w), float(dpnp.linalg.norm(w))
dpnp.linalg.solve(dpnp.eye(4, dtype=dpnp.float32, sycl_queue=shared) * 2, dpnp.ones(4, dtype=dpnp.float32, sycl_queue=shared))
counts, lock, errors = collections.Counter(), threading.Lock(), []
start = threading.Barrier(THREADS)


def work(t):
    try:
        q = own[t]
        x = dpm.MemoryUSMDevice(N * 4, queue=q)
        q.memcpy(x, np.ones(N, dtype=np.float32), N * 4)
        host = np.empty(N, dtype=np.float32)
        a = dpnp.eye(16, dtype=dpnp.float32, sycl_queue=q) * (t + 2)
        b = dpnp.ones(16, dtype=dpnp.float32, sycl_queue=q)
        start.wait()
        for r in range(ROUNDS):
            q.submit(k_twice, [x], [N]).wait()
            with lock:
                counts["twice"] += 1
            q.memcpy(host, x, N * 4)
            v = dpnp.asarray(host, sycl_queue=q)
            s, m = float(dpnp.sum(v)), float(dpnp.max(v))
            assert s == N * 2.0 ** (r + 1) and m == 2.0 ** (r + 1), (s, m)
            srt = dpnp.sort(dpnp.arange(N, 0, -1, dtype=dpnp.float32, sycl_queue=q))
            assert float(srt[0]) == 1.0
            nrm = float(dpnp.linalg.norm(b))
            sol = dpnp.linalg.solve(a, b)
            assert abs(float(sol[0]) - 1.0 / (t + 2)) < 1e-6 and abs(nrm - 4.0) < 1e-6
            if t < 2:
                shared.submit(k_inc, [sh, ctypes.c_float(1.0)], [N])
                with lock:
                    counts["inc_shared"] += 1
        shared.wait()
    except Exception as e:  # reported, and the exit status says so
        errors.append(f"thread {t}: {e!r}")


ts = [threading.Thread(target=work, args=(t,), name=f"worker{t}") for t in range(THREADS)]
for x in ts:
    x.start()
for x in ts:
    x.join()
back = np.empty(N, dtype=np.float32)
shared.memcpy(back, sh, N * 4)
for k, n in sorted(counts.items()):
    print(f"count {k} {n}")
print("\n".join(errors) or f"dpnp_threads: ok (shared value {back[0]}, device {dev.name})")
sys.exit(1 if errors or back[0] != 2 * ROUNDS else 0)
