#!/usr/bin/env python3
"""Does an OpenCL device's clock drift from CLOCK_MONOTONIC? (the OpenCL layer's calibration
assumes it does not: crates/offtrace-opencl/src/calibration.rs)

Every 200 ms for N seconds, the narrowest of 20 `clGetDeviceAndHostTimer` calls bracketed by
two CLOCK_MONOTONIC reads; prints (bracket midpoint - device time) relative to the first
sample, and the runtime's own host timer against the midpoint. A drift of d ppm shows as a
column growing by d ns per ms.

usage (Intel's CPU runtime from the SYCL venv; PoCL has no clGetDeviceAndHostTimer):
  LD_LIBRARY_PATH=.venv/lib OCL_ICD_FILENAMES=$PWD/.venv/lib/libintelocl.so \\
    .venv/bin/python scripts/device-clock-drift.py [seconds]
"""
import ctypes
import ctypes.util
import sys
import time

CL_DEVICE_TYPE_ALL = 0xFFFFFFFF


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    cl = ctypes.CDLL(ctypes.util.find_library("OpenCL") or "libOpenCL.so.1")
    n = ctypes.c_uint()
    plats = (ctypes.c_void_p * 8)()
    cl.clGetPlatformIDs(8, plats, ctypes.byref(n))
    dev = ctypes.c_void_p()
    for i in range(n.value):
        if cl.clGetDeviceIDs(ctypes.c_void_p(plats[i]), ctypes.c_ulong(CL_DEVICE_TYPE_ALL), 1, ctypes.byref(dev), None) == 0:
            break
    else:
        sys.exit("no OpenCL device")
    d, h = ctypes.c_ulong(), ctypes.c_ulong()
    mono = lambda: time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    rows = []
    end = mono() + int(seconds * 1e9)
    while mono() < end:
        best = None
        for _ in range(20):
            h0 = mono()
            r = cl.clGetDeviceAndHostTimer(dev, ctypes.byref(d), ctypes.byref(h))
            h1 = mono()
            if r != 0:
                sys.exit(f"clGetDeviceAndHostTimer: error {r} (PoCL does not implement it)")
            if best is None or h1 - h0 < best[0]:
                best = (h1 - h0, h0, h1, d.value, h.value)
        rows.append(best)
        time.sleep(0.2)
    _, a0, b0, d0, _ = rows[0]
    first = (a0 + b0) // 2 - d0
    for w, a, b, dv, hv in rows:
        mid = (a + b) // 2
        print(f"t={(a - a0) / 1e9:6.3f} s  bracket {w:5d} ns  (mid - device) - first {mid - dv - first:+7d} ns"
              f"  (host timer - mid) {hv - mid:+7d} ns")


if __name__ == "__main__":
    main()
