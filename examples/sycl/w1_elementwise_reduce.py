"""W1: dpnp element-wise arithmetic (a*2+b, sin), reductions (sum, max, mean) and a device-to-host
copy on 65,536 float32: kernels, USM allocations and frees, a few sycl::buffers."""
import dpnp

n = 1 << 16
a = dpnp.arange(n, dtype="f4")
b = dpnp.ones(n, dtype="f4")
c = a * 2 + b
d = dpnp.sin(c)
total = dpnp.sum(d)
largest = dpnp.max(c)
mean = dpnp.mean(c)
host = dpnp.asnumpy(c)
print("W1", float(total), float(largest), float(mean), host[:3])
