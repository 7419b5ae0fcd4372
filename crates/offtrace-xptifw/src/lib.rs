//! libxptifw.so: the exported XPTI C ABI.
