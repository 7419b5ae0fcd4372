#!/usr/bin/env bash
# Build the shared full-dump XPTI subscriber (../shared/tools/xpti-dump) into target/xpti-dump,
# without writing into shared/. Used by the comparison tests and scripts/compare-xpti-dump.sh.
#
# usage: scripts/build-xpti-dump.sh [VENV]     prints the path of libdump.so
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${1:-${OFFTRACE_SYCL_VENV:-$here/.venv}}
shared=${OFFTRACE_SHARED:-$here/../shared}
src=$shared/tools/xpti-dump
[ -f "$src/dump.c" ] || { echo "build-xpti-dump: $src/dump.c not found (set OFFTRACE_SHARED)" >&2; exit 1; }
out=$here/target/xpti-dump
mkdir -p "$out"
# Tests may build it concurrently: one builder at a time.
exec 9>"$out/.lock"
flock 9
cp "$src/dump.c" "$src/xpti_c.h" "$src/Makefile" "$src/analyze.py" "$out/"
make -s -C "$out" VENV="$venv" >&2
echo "$out/libdump.so"
