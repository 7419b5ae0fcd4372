#!/bin/bash
# Runs on the accelerator machine from a folder holding this script, the release `offtrace`,
# the `cupti_kernels` example and compare_cupti_ncu.py: `metrics list` (the CUPTI groups), the
# range profiler per kernel through offtrace's event-based queries vs `ncu --metrics` on the
# same kernels (clocks unlocked as in the range profiler, and ncu's default base clocks), PM
# sampling at 1 ms through a streamer during idle / compute / idle / memory / idle phases.
# Usage: cupti_run.sh [range] [ncu] [nocache] [pm] [pmtrace]   (default: range ncu pm)
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
parts=${*:-range ncu pm}
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
M=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active
LOG=$OUT/log.txt
{
nvidia-smi --query-gpu=name,driver_version --format=csv
timeout 60 ./offtrace metrics list --format json > "$OUT/list.json" 2>&1
timeout 60 ./offtrace metrics list 2>&1 | grep -A6 -E "^device 1|cupti"
echo "== pmprobe"; timeout 60 ./cupti_kernels pmprobe 2>&1
} > "$LOG" 2>&1
if [[ $parts == *range* ]]; then
  timeout 120 ./cupti_kernels range 5 > "$OUT/range.csv" 2>> "$LOG"; echo "range rc $?" >> "$LOG"
fi
if [[ $parts == *ncu* ]]; then
  timeout 150 ncu --metrics $M --clock-control none --print-units base --csv ./cupti_kernels plain 5 > "$OUT/ncu-clock-none.csv" 2>> "$LOG"; echo "ncu rc $?" >> "$LOG"
  timeout 150 ncu --metrics $M --print-units base --csv ./cupti_kernels plain 5 > "$OUT/ncu-default.csv" 2>> "$LOG"; echo "ncu default rc $?" >> "$LOG"
  python3 compare_cupti_ncu.py "$OUT/range.csv" "$OUT/ncu-clock-none.csv" "$OUT/ncu-default.csv" >> "$LOG" 2>&1
fi
if [[ $parts == *nocache* ]]; then
  # ncu without its cache flush before each kernel (as the range profiler: L2 as the previous kernel left it).
  timeout 150 ncu --metrics $M --cache-control none --clock-control none --print-units base --csv ./cupti_kernels plain 5 > "$OUT/ncu-nocache.csv" 2>> "$LOG"; echo "ncu nocache rc $?" >> "$LOG"
  python3 compare_cupti_ncu.py "$OUT/range.csv" "$OUT/ncu-nocache.csv" >> "$LOG" 2>&1
fi
if [[ " $parts " == *" pm "* ]]; then
  echo "== pm" >> "$LOG"
  OFFTRACE_CUPTI_TRACE=${OFFTRACE_CUPTI_TRACE:-0} PERIOD_US=1000 timeout 60 ./cupti_kernels pm > "$OUT/pm.csv" 2> "$OUT/pm.err"; echo "pm rc $?" >> "$LOG"
  tail -40 "$OUT/pm.err" >> "$LOG"; rm -f "$OUT/pm.err"
  python3 compare_cupti_ncu.py --pm "$OUT/pm.csv" >> "$LOG" 2>&1
fi
if [[ $parts == *pmtrace* ]]; then
  echo "== pmtrace (Sampler into a trace, 1 ms)" >> "$LOG"
  timeout 60 ./cupti_kernels pmtrace "$OUT/pm.offtrace" >> "$LOG" 2>&1; echo "pmtrace rc $?" >> "$LOG"
  timeout 60 ./offtrace report "$OUT/pm.offtrace" 2>&1 | grep -A6 -i "^counters" >> "$LOG"
  echo "== pm at 10 ms (host cost per report)" >> "$LOG"
  PERIOD_US=10000 timeout 60 ./cupti_kernels pm > /dev/null 2>> "$LOG"; echo "pm10 rc $?" >> "$LOG"
fi
cat "$LOG"
