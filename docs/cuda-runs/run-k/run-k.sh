#!/usr/bin/env bash
# Run K (s3-cudaoh): the overhead of offtrace record (default) and torch.profiler on train.py
# with run I's pinned method: untraced, untraced_b (noise floor), record, torch; fresh process
# per mode per repetition, rotated order, time-boxed. Everything comes back as one tarball plus
# the log.
cd "$(dirname "$0")"
export PYTHON=/opt/torch/.venv/bin/python
O=$OUT/run-k; mkdir -p $O
{ date -u; lscpu; echo; lscpu -p=CPU,CORE,SOCKET,NODE; nproc; cat /proc/loadavg
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,persistence_mode --format=csv; } > $O/host.txt 2>&1
PIN=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '!s[$2]++ && $2!=0 {print $1}' | head -4 | paste -sd,)
[ -n "$PIN" ] || PIN=4-7
echo "PIN_CPUS=$PIN" | tee -a $O/host.txt
OUT=$O PIN_CPUS=$PIN THREADS=4 MODES="untraced untraced_b record torch" REPS=14 STEPS=60 WARMUP=20 \
  DEADLINE_S=${DEADLINE_S:-340} timeout 460 scripts/cuda/overhead-ablation.sh > $O/run.log 2>&1
echo "rc=$?" >> $O/run.log
cat /proc/loadavg >> $O/host.txt
tar -C $OUT -czf $OUT/run-k.tar.gz run-k && rm -rf $O/ablation-base.tar.gz $O/ablation-base.json $O/stats-base.json $O/host.txt
tail -40 $O/run.log
