"""offtrace bundled example: one long chain of dependent commands over two queues, through dpctl.

A chain of LENGTH kernel launches, alternating between two out-of-order queues, each launch
depending on the previous one's event (dEvents): the runtime sees every dependency as an event of
another queue (a `virtual_node[<event>]` in its graph), so the task graph's longest chain is the
whole chain only if those events are followed back to the commands that signalled them. A second,
independent chain of 2 launches runs beside it.

Kernels: `step_a` on the first queue, `step_b` on the second, `side` for the short chain. Usage:
python dependency_chain.py [length]   (default 6). Prints the result and "dependency_chain: ok".
"""
import ctypes
import sys

import numpy as np
import dpctl
import dpctl.memory as dpm
import dpctl.program as dpp

SRC = r"""
__kernel void step_a(__global float *y) { size_t i = get_global_id(0); y[i] = y[i] + 1.0f; }
__kernel void step_b(__global float *y) { size_t i = get_global_id(0); y[i] = y[i] * 2.0f; }
__kernel void side(__global float *z) { size_t i = get_global_id(0); z[i] = z[i] + 3.0f; }
"""

N = 1 << 10


def main(length):
    qa = dpctl.SyclQueue("cpu")
    ctx, dev = qa.sycl_context, qa.sycl_device
    qb = dpctl.SyclQueue(ctx, dev)
    prog = dpp.create_program_from_source(qa, SRC)
    step_a, step_b, side = (prog.get_sycl_kernel(n) for n in ("step_a", "step_b", "side"))
    y = dpm.MemoryUSMShared(N * 4, queue=qa)
    z = dpm.MemoryUSMShared(N * 4, queue=qa)
    y.memset(0)
    z.memset(0)
    expected = 0.0
    events = []
    for i in range(length):
        q, k = (qa, step_a) if i % 2 == 0 else (qb, step_b)
        events.append(q.submit(k, [y], [N], dEvents=events[-1:]))
        expected = expected + 1.0 if i % 2 == 0 else expected * 2.0
    s1 = qb.submit(side, [z], [N])
    s2 = qa.submit(side, [z], [N], dEvents=[s1])
    events[-1].wait()
    s2.wait()
    got = np.frombuffer(y, dtype=np.float32)
    side_got = np.frombuffer(z, dtype=np.float32)
    ok = bool(np.all(got == expected)) and bool(np.all(side_got == 6.0))
    print(f"dependency_chain: {length} steps, y[0] = {got[0]} (expected {expected}), z[0] = {side_got[0]}")
    if not ok:
        print("dependency_chain: FAILED")
        return 1
    print("dependency_chain: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 6))
