"""dpnp commands that wait on dpnp's host tasks (`astype`, `cumsum`) and dpctl USM copies, on one
in-order profiling queue, 3 rounds: the SYCL runtime enqueues some of their commands after
another task-graph record came on the thread, or from its own threads."""
import numpy as np
import dpctl
import dpctl.memory as dpm
import dpnp

N = 1 << 16
NB = N * 4
q = dpctl.SyclQueue(dpctl.SyclDevice("opencl:cpu"), property=["enable_profiling", "in_order"])
d1, d2 = dpm.MemoryUSMDevice(NB, queue=q), dpm.MemoryUSMDevice(NB, queue=q)
host = np.arange(N, dtype=np.float32)
back = np.empty_like(host)
for r in range(3):
    x = dpnp.arange(N, dtype=dpnp.float32, sycl_queue=q)
    s = float(dpnp.sum(x))
    a = dpnp.full(N, 2, dtype=dpnp.int32, sycl_queue=q)
    c = dpnp.cumsum(a.astype(dpnp.float32))
    q.memcpy_async(d1, host, NB)
    q.memcpy_async(d2, d1, NB)
    q.memcpy_async(back, d2, NB)
    q.wait()
    assert np.array_equal(back, host) and float(c[-1]) == 2 * N and s == N * (N - 1) / 2
print("dpnp_host_tasks: ok")
