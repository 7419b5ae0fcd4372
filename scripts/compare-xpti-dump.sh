#!/usr/bin/env bash
# Record one program with offtrace's agent and the reference full-dump subscriber (tools/xpti-dump) loaded together
# (XPTI_SUBSCRIBERS=dump,agent: both see exactly the same notifications), then compare the
# per-stream, per-type counts of `offtrace report --format json` with the dump's.
#
# usage: scripts/compare-xpti-dump.sh [--dispatcher intel|offtrace|PATH] [--markdown] [--out DIR] PROGRAM.py [ARGS...]
# Environment: OFFTRACE_BIN_DIR (default target/debug): where offtrace, libofftrace_agent.so and
# libxptifw.so.1 are; OFFTRACE_SYCL_VENV (default .venv).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${OFFTRACE_SYCL_VENV:-$here/.venv}
bindir=${OFFTRACE_BIN_DIR:-$here/target/debug}
dispatcher=intel markdown= out=$(mktemp -d)
while [ $# -gt 0 ]; do
  case $1 in
    --dispatcher) dispatcher=$2; shift 2 ;;
    --markdown) markdown=1; shift ;;
    --out) out=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { sed -n '2,9p' "$0"; exit 2; }
case $dispatcher in
  intel) disp=$venv/lib/libxptifw.so.1 ;;
  offtrace) disp=$bindir/libxptifw.so.1; [ -e "$disp" ] || disp=$bindir/libxptifw.so ;;
  *) disp=$dispatcher ;;
esac
dump=${OFFTRACE_XPTI_DUMP:-$("$here/scripts/build-xpti-dump.sh" "$venv")}
name=$(basename "$1" .py)
mkdir -p "$out"
# A trace already there would be kept and this run's written beside it (`<path>.<pid>`).
rm -f "$out/$name.offtrace"
rc=0
env LD_LIBRARY_PATH="$venv/lib" OCL_ICD_FILENAMES="$venv/lib/libintelocl.so" \
  XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER="$disp" \
  XPTI_SUBSCRIBERS="$dump,$bindir/libofftrace_agent.so" UR_ENABLE_LAYERS=UR_LAYER_TRACING \
  DUMP_FILE="$out/$name.jsonl" DUMP_SKIP=sycl.debug,ur.call.debug DUMP_DETAIL=2 \
  OFFTRACE_OUTPUT="$out/$name.offtrace" OFFTRACE_DETAIL=normal OFFTRACE_RAW=1 \
  "$venv/bin/python" "$@" > "$out/$name.stdout" 2>&1 || rc=$?
[ $rc = 0 ] || { echo "compare-xpti-dump: $1 exited with $rc (see $out/$name.stdout)" >&2; exit 1; }
"$bindir/offtrace" report "$out/$name.offtrace" --format json > "$out/$name.report.json"
python3 "$here/scripts/compare_counts.py" "$out/$name.jsonl" "$out/$name.report.json" ${markdown:+--markdown "$name ($dispatcher dispatcher)"}
