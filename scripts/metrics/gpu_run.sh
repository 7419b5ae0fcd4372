#!/bin/bash
# Runs on the accelerator machine from .gpu-i15/: NVML through offtrace vs nvidia-smi, sampled
# at the same time during a PyTorch run; offtrace-metrics' tests with NVML present.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
./offtrace metrics list --format json > "$OUT/list.json"; ./offtrace metrics list | tee "$OUT/list.txt"
for t in ./tests/*; do "$t" --test-threads=1 --nocapture 2>&1 | grep -E 'sysman gpu|test result|FAIL|panicked'; done | tee "$OUT/tests.txt"
cc -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O1 -I include metrics.c -o metrics_c -L . -lofftrace -Wl,-rpath,"$PWD" \
  && ./metrics_c | tee "$OUT/c_api.txt"
./offtrace monitor --interval 200ms --format csv > "$OUT/monitor.csv" 2>"$OUT/monitor.err" &
MON=$!
nvidia-smi --query-gpu=timestamp,power.draw,power.draw.average,power.draw.instant,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu,utilization.memory,memory.used \
  --format=csv,nounits -lms 200 > "$OUT/smi.csv" &
SMI=$!
sleep 1
python3 gpu_workload.py 4 | tee "$OUT/workload.log"
sleep 1
kill $MON $SMI; wait $MON $SMI 2>/dev/null
python3 compare_nvml_smi.py "$OUT/monitor.csv" "$OUT/smi.csv" "$OUT/workload.log" | tee "$OUT/compare.txt"
head -3 "$OUT/monitor.csv"; wc -l "$OUT/monitor.csv" "$OUT/smi.csv"
