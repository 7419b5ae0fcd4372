"""W2: dpnp.matmul and A @ B.T on 256x256 float32 through oneMKL's SYCL BLAS (host tasks on the CPU
device), with arrays filled from a seeded host generator."""
import numpy as np
import dpnp

rng = np.random.default_rng(0)
a = dpnp.asarray(rng.random((256, 256), dtype=np.float32))
b = dpnp.asarray(rng.random((256, 256), dtype=np.float32))
c = dpnp.matmul(a, b)
c2 = a @ b.T
print("W2", float(c.sum()), float(c2[0, 0]))
