#!/usr/bin/env bash
# Intel's XPTI dispatcher against offtrace's, call by call (tools/xpti-bench/xpti_bench.c): the
# figures of docs/overhead.md, "XPTI dispatcher".
#
# usage: scripts/bench-xpti.sh [xpti_bench options: -n N -r REPS -t THREADS]
# Builds offtrace's dispatcher (release) and the benchmark; runs it with 1 and 2 threads against
# <venv>/lib/libxptifw.so.1 (OFFTRACE_SYCL_VENV, default .venv) and target/release/libxptifw.so.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
venv=${OFFTRACE_SYCL_VENV:-$here/.venv}
cargo build --release --locked -q -p offtrace-xptifw
mkdir -p target/xpti-bench
${CC:-cc} -O2 -Wall -Wextra -Werror -o target/xpti-bench/xpti_bench tools/xpti-bench/xpti_bench.c -ldl -lpthread
for t in 1 2; do
  target/xpti-bench/xpti_bench -t "$t" "$@" "$venv/lib/libxptifw.so.1" "$here/target/release/libxptifw.so"
  echo
done
