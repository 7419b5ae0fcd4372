#!/usr/bin/env bash
# Build offtrace's reference full-dump XPTI subscriber (tools/xpti-dump/xpti_dump.c) into
# target/xpti-dump. Used by the comparison tests and scripts/compare-xpti-dump.sh.
#
# usage: scripts/build-xpti-dump.sh [VENV]     prints the path of libxpti_dump.so
#
# The library gets a DT_NEEDED on libxptifw.so.1 and no rpath: at run time the loader binds it to
# the dispatcher the runtime has already loaded (matched by SONAME), whichever that is.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${1:-${OFFTRACE_SYCL_VENV:-$here/.venv}}
src=$here/tools/xpti-dump/xpti_dump.c
[ -e "$venv/lib/libxptifw.so.1" ] || { echo "build-xpti-dump: no $venv/lib/libxptifw.so.1 (run scripts/setup-sycl.sh)" >&2; exit 1; }
out=$here/target/xpti-dump
mkdir -p "$out"
# Tests may build it concurrently: one builder at a time, and an atomic rename.
exec 9>"$out/.lock"
flock 9
if [ ! -e "$out/libxpti_dump.so" ] || [ "$src" -nt "$out/libxpti_dump.so" ]; then
  ${CC:-cc} -O2 -Wall -Wextra -Werror -shared -fPIC -o "$out/libxpti_dump.so.tmp" "$src" \
    -L"$venv/lib" -l:libxptifw.so.1 -lpthread
  mv "$out/libxpti_dump.so.tmp" "$out/libxpti_dump.so"
fi
echo "$out/libxpti_dump.so"
