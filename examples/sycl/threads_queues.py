"""offtrace bundled example: several threads submitting to several queues at once, through dpctl.

Each of THREADS worker threads owns an in-order queue and an out-of-order queue; all of them also
submit to one queue shared between threads. Every iteration of a worker does, on its queues:

  * a fill of a device allocation (memset),
  * a host-to-device copy, a device-to-device copy and a device-to-host copy (memcpy_async),
  * two OpenCL C kernels (scale_add on its own queue, square on the shared queue, the second
    depending on the first: a cross-queue and cross-thread edge),
  * a barrier (submit_barrier) on the out-of-order queue,
  * a host task (dpctl's _submit_keep_args_alive, which schedules a sycl host_task that releases
    the Python objects once the gating events are done),
  * event waits and a queue wait.

The result of every worker is checked on the host, so the program fails loudly if ordering is
broken. Usage: python threads_queues.py [threads] [iterations]   (default 4 threads, 6 iterations).
Prints one line per worker and "threads_queues: ok".
"""
import ctypes
import sys
import threading

import numpy as np
import dpctl
import dpctl.memory as dpm
import dpctl.program as dpp

SRC = r"""
__kernel void scale_add(__global float *y, __global const float *x, float a) {
    size_t i = get_global_id(0);
    y[i] = a * x[i] + y[i];
}
__kernel void square(__global float *y) {
    size_t i = get_global_id(0);
    y[i] = y[i] * y[i];
}
"""

N = 1 << 12
NBYTES = N * 4


def worker(index, iterations, ctx, dev, shared_q, kernels, results, barrier):
    k_scale_add, k_square = kernels
    q_in = dpctl.SyclQueue(ctx, dev, property="in_order")
    q_ooo = dpctl.SyclQueue(ctx, dev, property="enable_profiling")
    x_host = np.full(N, index + 1, dtype=np.float32)
    out = np.empty(N, dtype=np.float32)
    x_dev = dpm.MemoryUSMDevice(NBYTES, queue=q_in)
    y_dev = dpm.MemoryUSMDevice(NBYTES, queue=q_in)
    y_shared = dpm.MemoryUSMShared(NBYTES, queue=q_ooo)
    pinned = dpm.MemoryUSMHost(NBYTES, queue=q_ooo)
    barrier.wait()  # every thread submits at the same time from here on
    for _ in range(iterations):
        y_dev.memset(0)                                              # fill (waits for it)
        e_h2d = q_in.memcpy_async(x_dev, x_host, NBYTES)             # host -> device
        e_k1 = q_in.submit(k_scale_add, [y_dev, x_dev, ctypes.c_float(2.0)], [N], dEvents=[e_h2d])
        e_d2d = q_ooo.memcpy_async(y_shared, y_dev, NBYTES, [e_k1])  # device -> shared, other queue
        e_k2 = shared_q.submit(k_square, [y_shared], [N], dEvents=[e_d2d])  # queue shared by threads
        e_bar = q_ooo.submit_barrier([e_k2])                         # barrier on the out-of-order queue
        e_d2h = q_ooo.memcpy_async(pinned, y_shared, NBYTES, [e_bar])  # shared -> host USM
        e_host = q_ooo._submit_keep_args_alive((x_dev, y_dev, y_shared, pinned), [e_d2h])  # host task
        e_d2h.wait()
        e_host.wait()
        out[:] = np.frombuffer(pinned, dtype=np.float32)
        q_in.wait()
    expected = (2.0 * (index + 1)) ** 2
    results[index] = bool(np.all(out == expected))
    print(f"threads_queues: worker {index}: {iterations} iterations, y[0] = {out[0]} (expected {expected})")


def main(threads, iterations):
    q0 = dpctl.SyclQueue("cpu", property="in_order")
    ctx, dev = q0.sycl_context, q0.sycl_device
    shared_q = dpctl.SyclQueue(ctx, dev)
    prog = dpp.create_program_from_source(q0, SRC)
    kernels = (prog.get_sycl_kernel("scale_add"), prog.get_sycl_kernel("square"))
    results = [False] * threads
    barrier = threading.Barrier(threads)
    ts = [
        threading.Thread(target=worker, args=(i, iterations, ctx, dev, shared_q, kernels, results, barrier))
        for i in range(threads)
    ]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    shared_q.wait()
    print("threads_queues:", "ok" if all(results) else f"FAILED {results}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 4, int(sys.argv[2]) if len(sys.argv) > 2 else 6))
