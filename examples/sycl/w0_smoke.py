"""W0, smoke test: one dpnp array and a reduction. Checks that the runtime, the device and tracing
work at all. Prints 90.0."""
import dpnp

a = dpnp.arange(10, dtype="f4")
print(float((a * 2).sum()))
