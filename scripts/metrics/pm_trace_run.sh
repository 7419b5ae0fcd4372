#!/bin/bash
# Runs on the accelerator machine from a bundle folder (scripts/cuda/bundle.sh plus
# target/release/trace_jsonl, examples/cuda/pm_duty.cu, scripts/metrics/pm_vs_kernels.py):
# `offtrace record --metrics cupti.pm_sampling` on pm_duty (a CUDA program with a known duty
# cycle) at 1 ms and 10 ms, then pm_vs_kernels.py on each trace: PM utilisation per report vs
# the kernels' device busy time from the same trace. Results under $OUT.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda-13.0/bin:$PATH
LOG=$OUT/log.txt
{
nvidia-smi --query-gpu=name,driver_version --format=csv
nvcc -O2 -arch=sm_90 -o /tmp/pm_duty examples/cuda/pm_duty.cu || echo "nvcc failed"
echo "== untraced"; timeout 60 /tmp/pm_duty 3
echo "== record without --metrics (control)"; timeout 60 target/release/offtrace record -o "$OUT/control.offtrace" -- /tmp/pm_duty 3; echo "record rc $?"; rm -f "$OUT/control.offtrace"
for p in 1ms 10ms; do
  echo "== record --metrics cupti.pm_sampling --sample-period $p"
  OFFTRACE_PM_CLOCK_LOG=$OUT/pmclock-$p.txt OFFTRACE_METRICS_STATS=$OUT/stats-$p.jsonl timeout 120 target/release/offtrace record -o "$OUT/pm_duty-$p.offtrace" \
    --metrics cupti.pm_sampling --sample-period $p -- /tmp/pm_duty 3; echo "record rc $?"
  cat "$OUT/stats-$p.jsonl"
  echo "-- PM clock mapping (first decodes, last decode; OFFTRACE_PM_CLOCK_LOG)"
  head -3 "$OUT/pmclock-$p.txt"; tail -1 "$OUT/pmclock-$p.txt"; wc -l < "$OUT/pmclock-$p.txt"
  timeout 60 target/release/trace_jsonl "$OUT/pm_duty-$p.offtrace" > "$OUT/pm_duty-$p.jsonl"; echo "trace_jsonl rc $?"
  grep -c '"t":"kernel"' "$OUT/pm_duty-$p.jsonl"; grep '"t":"counter_def"' "$OUT/pm_duty-$p.jsonl"
  for m in gr__cycles_active sm__cycles_active; do
    echo "-- $m"
    python3 scripts/metrics/pm_vs_kernels.py "$OUT/pm_duty-$p.jsonl" --metric $m --csv "$OUT/bins-$p-$m.csv"
  done
done
echo "== report (1 ms)"; timeout 60 target/release/offtrace report "$OUT/pm_duty-1ms.offtrace" 2>&1 | head -60
} > "$LOG" 2>&1
rm -f "$OUT"/*.offtrace.cuda
cat "$LOG"
