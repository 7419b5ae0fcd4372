#!/bin/bash
# The OpenCL layer's preload mode against its layer mode, per cheap call (docs/overhead.md,
# "OpenCL preload mode: the export hop").
#
# usage: scripts/opencl-preload-cost.sh [REPS]    (cargo build --release -p offtrace-opencl first)
#
# Builds examples/opencl/many_kernels.c into a temporary folder and runs it on PoCL (Debian's
# ocl-icd) in five configurations, interleaved, REPS rounds (default 3):
#   plain        no layer
#   layer        OPENCL_LAYERS=libofftrace_opencl.so, nothing listening
#   preload      LD_PRELOAD=libofftrace_opencl.so, nothing listening (the exports own the layer)
#   layer-rec    layer, recording a trace (OFFTRACE_OUTPUT)
#   preload-rec  preload, recording a trace
# callgrind: instructions of the program's main thread (--separate-threads, file -01) at
# --calls 20000 and 60000 (clGetDeviceInfo(CL_DEVICE_TYPE)); per call = difference / 40000.
# Then the program's own wall time per call at --calls 2000000, 5 rounds interleaved (noisy:
# report medians).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib=${LAYER:-$root/target/release/libofftrace_opencl.so}
reps=${1:-3}
tmp=$(mktemp -d /tmp/opencl-preload-cost-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -O2 "$root/examples/opencl/many_kernels.c" -lOpenCL -o "$tmp/many"
envs() {
  case $1 in
    plain) ;;
    layer) echo "OPENCL_LAYERS=$lib" ;;
    preload) echo "LD_PRELOAD=$lib" ;;
    layer-rec) echo "OPENCL_LAYERS=$lib OFFTRACE_OUTPUT=$tmp/t.offtrace" ;;
    preload-rec) echo "LD_PRELOAD=$lib OFFTRACE_OUTPUT=$tmp/t.offtrace" ;;
  esac
}
ir() { # cfg calls
  rm -f "$tmp"/t.offtrace* "$tmp"/cg*
  # shellcheck disable=SC2046
  env $(envs "$1") valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$tmp/cg" \
    "$tmp/many" --kernels 10 --calls "$2" --platform Portable >/dev/null 2>&1
  grep -E "^(summary|totals):" "$tmp/cg-01" | head -1 | awk '{print $2}'
}
echo "# round configuration Ir@20000 Ir@60000 Ir/call"
for rep in $(seq "$reps"); do
  for cfg in plain layer preload layer-rec preload-rec; do
    a=$(ir $cfg 20000); b=$(ir $cfg 60000)
    echo "$rep $cfg $a $b $(( (b - a) / 40000 ))"
  done
done
echo "# round configuration ns/call (the program's wall time, --calls 2000000)"
for rep in 1 2 3 4 5; do
  for cfg in plain layer preload; do
    # shellcheck disable=SC2046
    ns=$(env $(envs $cfg) "$tmp/many" --kernels 10 --calls 2000000 --platform Portable | sed -n 's/^calls [0-9]*: \([0-9.]*\) ns.*/\1/p')
    echo "$rep $cfg $ns"
  done
done
