#!/bin/bash
# Runs on the accelerator machine from .gpu-i15/: NVML through offtrace vs nvidia-smi, sampled
# at the same time during a PyTorch run; offtrace-metrics' tests with NVML present.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
./offtrace metrics list --format json > "$OUT/list.json"; ./offtrace metrics list | tee "$OUT/list.txt"
for t in ./tests/*; do "$t" --test-threads=1 2>&1 | tail -4; done | tee "$OUT/tests.txt"
./offtrace monitor --interval 200ms --format csv > "$OUT/monitor.csv" 2>"$OUT/monitor.err" &
MON=$!
nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu,utilization.memory,memory.used \
  --format=csv,nounits -lms 200 > "$OUT/smi.csv" &
SMI=$!
sleep 1
python3 gpu_workload.py 4 | tee "$OUT/workload.log"
sleep 1
kill $MON $SMI; wait $MON $SMI 2>/dev/null
python3 compare_nvml_smi.py "$OUT/monitor.csv" "$OUT/smi.csv" "$OUT/workload.log" | tee "$OUT/compare.txt"
head -3 "$OUT/monitor.csv"; wc -l "$OUT/monitor.csv" "$OUT/smi.csv"
