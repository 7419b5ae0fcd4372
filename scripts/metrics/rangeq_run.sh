#!/bin/bash
# Runs on the accelerator machine from a bundle folder (scripts/cuda/bundle.sh plus
# target/release/cupti_kernels and this script): `offtrace record --query-metrics
# cupti.range_profiler` on the `cupti_kernels` example (`plain 5`: warm-up saxpy + fma_loop(100),
# then 5 x saxpy, fma_loop(20000), the kernels of docs/metrics.md's ncu table) and on
# examples/cuda/workload.cu (streams, copies, a CUDA graph); each report's command_metrics
# section (JSON and text) and the per-range log (OFFTRACE_RANGEQ_LOG). Results under $OUT.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda-13.0/bin:$PATH
B=target/release
LOG=$OUT/log.txt
{
nvidia-smi --query-gpu=name,driver_version --format=csv
nvcc -O2 -arch=sm_90 -cudart shared -o /tmp/workload examples/cuda/workload.cu || echo "nvcc failed"
for prog in cupti_kernels workload; do
  if [ $prog = cupti_kernels ]; then cmd=("$B/cupti_kernels" plain 5); else cmd=(/tmp/workload); fi
  echo "== $prog: record --query-metrics cupti.range_profiler"
  OFFTRACE_RANGEQ_LOG=$OUT/$prog-ranges.csv timeout 40 $B/offtrace record -o "$OUT/$prog.offtrace" \
    --query-metrics cupti.range_profiler -- "${cmd[@]}" > "$OUT/$prog-stdout.txt" 2>&1; echo "record rc $?"
  tail -5 "$OUT/$prog-stdout.txt"
  head -40 "$OUT/$prog-ranges.csv"
  timeout 20 $B/offtrace report "$OUT/$prog.offtrace" --format json > "$OUT/$prog-report.json" 2>&1; echo "report rc $?"
  python3 - "$OUT/$prog-report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rows = r.get("command_metrics", [])
print(f"command_metrics rows: {len(rows)}")
for x in rows:
    print(f'{x["kind"]:16} {x["name"][:40]:40} {x["metric"][21:]:70} n={x["commands"]:3} mean={x["mean"]:.6g} min={x["min"]:.6g} max={x["max"]:.6g} {x["unit"]}')
PY
  timeout 20 $B/offtrace report "$OUT/$prog.offtrace" > "$OUT/$prog-report.txt" 2>&1
done
echo "== control: cupti_kernels recorded without --query-metrics"
timeout 20 $B/offtrace record -o /tmp/control.offtrace -- $B/cupti_kernels plain 5; echo "record rc $?"
} > "$LOG" 2>&1
rm -f "$OUT"/*.offtrace.cuda
cat "$LOG"
