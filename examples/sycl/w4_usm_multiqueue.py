"""W4: dpctl directly, two queues on one context.

  * an in-order queue and an out-of-order queue with profiling on the same context and device,
  * USM device, shared and host allocations; copy_from_host, memcpy, memcpy_async, copy_to_host,
  * an OpenCL C kernel (axpy) built with dpctl.program and submitted once on each queue, the second
    submission depending on the first (a cross-queue edge), with 65,536-byte USM arguments,
  * a device-to-device copy between the queues, event and queue waits, the kernel's profiling
    timestamps.

dpnp only creates and reads the arrays (dpctl.tensor moved into dpnp.tensor). The offtrace tests
count what the runtime emits for this program, so changing it changes their expected ranges.
Ends with the line "W4 [1. 3. 5. 7.] [0. 3. 6. 9.]".
"""
import ctypes

import numpy as np
import dpctl
import dpctl.memory as dpm
import dpctl.program as dpp
import dpnp

q1 = dpctl.SyclQueue("cpu", property="in_order")
q2 = dpctl.SyclQueue(q1.sycl_context, q1.sycl_device, property="enable_profiling")
print("queues", q1, q2)
n = 1 << 14
host = np.arange(n, dtype=np.float32)

# USM memory of the three kinds and explicit copies between them
dev = dpm.MemoryUSMDevice(host.nbytes, queue=q1)
dev.copy_from_host(host.view(np.uint8))
shared = dpm.MemoryUSMShared(host.nbytes, queue=q2)
pinned = dpm.MemoryUSMHost(host.nbytes, queue=q2)
q1.memcpy(shared, dev, host.nbytes)
copied = q2.memcpy_async(pinned, shared, host.nbytes)
copied.wait()
back = np.empty_like(host)
dev.copy_to_host(back.view(np.uint8))
assert (back == host).all()

AXPY = """
__kernel void axpy(__global float* y, __global const float* x, float a) {
  size_t i = get_global_id(0);
  y[i] = a * x[i] + y[i];
}
"""
axpy = dpp.create_program_from_source(q1, AXPY).get_sycl_kernel("axpy")

# on the in-order queue: y = 2x + 1
x1 = dpnp.asarray(host, sycl_queue=q1)
y1 = dpnp.ones(n, dtype="f4", sycl_queue=q1)
q1.wait()
e1 = q1.submit(axpy, [y1.get_array().usm_data, x1.get_array().usm_data, ctypes.c_float(2.0)], [n])
e1.wait()

# on the profiling queue, after e1: y = 3x
x2 = dpnp.asarray(host, sycl_queue=q2)
y2 = dpnp.zeros(n, dtype="f4", sycl_queue=q2)
q2.wait()  # submit() does not know about dpnp's pending fill on this out-of-order queue
e2 = q2.submit(axpy, [y2.get_array().usm_data, x2.get_array().usm_data, ctypes.c_float(3.0)], [n], dEvents=[e1])
e2.wait()
print("profiling submit/start/end ns:", e2.profiling_info_submit, e2.profiling_info_start, e2.profiling_info_end)

# device-to-device copy from one queue's allocation to the other's
y3 = dpnp.asarray(y1, sycl_queue=q2)
print("W4", dpnp.asnumpy(y3)[:4], dpnp.asnumpy(y2)[:4])
q1.wait()
q2.wait()
