"""W3: dpnp.sort and argsort on 4,096 float32 and dpnp.fft.fft through oneMKL's DFT: many
sycl::buffers, accessors, buffer associate/release and dependency edges on memory objects."""
import numpy as np
import dpnp

x = dpnp.asarray(np.random.default_rng(1).random(4096).astype(np.float32))
y = dpnp.sort(x)
i = dpnp.argsort(x)
z = dpnp.fft.fft(x)
print("W3", float(y[0]), int(i[0]), complex(z[1]))
