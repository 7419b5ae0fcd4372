#!/usr/bin/env bash
# Run I (s2-cudaoh): untraced, untraced_b (noise floor), offtrace record (default kinds),
# torch.profiler, every process under the same taskset (one logical CPU per physical core,
# core 0 skipped, 4 CPUs) with OMP/MKL threads = 4; fresh process per mode per repetition,
# rotated order, time-boxed.
cd "$(dirname "$0")"
export PYTHON=/opt/torch/.venv/bin/python
O=$OUT/run-i; mkdir -p $O
{ date -u; lscpu; echo; lscpu -p=CPU,CORE,SOCKET,NODE; nproc; cat /proc/loadavg
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,persistence_mode --format=csv; } > $O/host.txt 2>&1
PIN=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '!s[$2]++ && $2!=0 {print $1}' | head -4 | paste -sd,)
[ -n "$PIN" ] || PIN=4-7
echo "PIN_CPUS=$PIN" | tee -a $O/host.txt
OUT=$O PIN_CPUS=$PIN THREADS=4 MODES="untraced untraced_b record torch" REPS=12 STEPS=60 WARMUP=20 \
  DEADLINE_S=330 timeout 440 scripts/cuda/overhead-ablation.sh > $O/run.log 2>&1
echo "rc=$?" >> $O/run.log
cat /proc/loadavg >> $O/host.txt
tail -45 $O/run.log
