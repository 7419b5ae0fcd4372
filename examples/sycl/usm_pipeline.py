"""offtrace bundled example: a small multi-queue SYCL pipeline driven through dpctl only.

What it exercises (everything offtrace records from the SYCL runtime):
  * an OpenCL C program built at run time with dpctl.program (two kernels),
  * USM device, shared and host allocations, host<->device and device<->device copies, a fill,
  * three queues on one context: in-order, out-of-order with profiling, and a third one,
  * cross-queue dependencies (dEvents), event waits, queue waits (host waits),
  * the kernels' device timestamps through event profiling info.

Usage: python usm_pipeline.py [iterations]     (default 8). Prints a checksum line and exits 0.
"""
import ctypes
import sys

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


def main(iterations: int) -> int:
    q_in = dpctl.SyclQueue("cpu", property="in_order")
    ctx, dev = q_in.sycl_context, q_in.sycl_device
    q_prof = dpctl.SyclQueue(ctx, dev, property="enable_profiling")
    q_aux = dpctl.SyclQueue(ctx, dev)

    prog = dpp.create_program_from_source(q_in, SRC)
    k_scale_add = prog.get_sycl_kernel("scale_add")
    k_square = prog.get_sycl_kernel("square")

    n = 1 << 15
    nbytes = n * 4
    host_x = np.arange(n, dtype=np.float32) / n
    x_dev = dpm.MemoryUSMDevice(nbytes, queue=q_in)
    y_dev = dpm.MemoryUSMDevice(nbytes, queue=q_in)
    y_shared = dpm.MemoryUSMShared(nbytes, queue=q_prof)
    out_host = dpm.MemoryUSMHost(nbytes, queue=q_aux)

    x_dev.copy_from_host(host_x.view(np.uint8))
    y_dev.memset(0)                        # a fill
    q_in.wait()

    device_ns = 0
    for it in range(iterations):
        # in-order queue: y += 2x
        e1 = q_in.submit(k_scale_add, [y_dev, x_dev, ctypes.c_float(2.0)], [n])
        # profiling queue copies y to shared memory after e1 (cross-queue dependency)
        e2 = q_prof.memcpy_async(y_shared, y_dev, nbytes, [e1])
        # third queue squares the shared copy after the copy
        e3 = q_aux.submit(k_square, [y_shared], [n], dEvents=[e2])
        e3.wait()                           # device wait on one event
        # profiling queue: a kernel whose device time we read
        e4 = q_prof.submit(k_scale_add, [y_shared, x_dev, ctypes.c_float(0.5)], [n], dEvents=[e3])
        e4.wait()
        device_ns += e4.profiling_info_end - e4.profiling_info_start
        q_aux.submit_barrier([e4])          # a barrier on the third queue
        q_aux.memcpy(out_host, y_shared, nbytes)
        q_aux.wait()                        # host wait on a whole queue

    result = np.empty(n, dtype=np.float32)
    out_host_view = np.frombuffer(out_host, dtype=np.float32)
    result[:] = out_host_view
    # y_dev after k iterations = 2k*x; y_shared = (2k*x)^2 + 0.5x after the last iteration
    k = iterations
    expected = (2.0 * k * host_x) ** 2 + 0.5 * host_x
    ok = np.allclose(result, expected, rtol=1e-4, atol=1e-4)
    print(f"usm_pipeline: iterations={iterations} checksum={float(result.sum()):.3f} ok={ok}")
    print(f"usm_pipeline: device time of profiled kernels: {device_ns} ns")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 8))
