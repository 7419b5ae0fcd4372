#!/usr/bin/env bash
# Run J (s3-cudaoh): where offtrace record's cost on train.py is. Run I's pinned method (one
# vCPU per core, core 0 skipped, 4 CPUs; OMP/MKL threads 4; 20 warm-up + 60 steps), plus
#  - API calls per name per step: two injected processes with every call traced
#    (OFFTRACE_CUDA_ALL_CALLS=1 OFFTRACE_CUDA_DRIVER_API=1), 10 and 50 steps, dumps differenced;
#  - modes untraced, untraced_b, record, ab (train.py --ab: offtrace_cuda_measure_phase's
#    phases 0-6 alternated inside each process), fresh processes in a rotated order, time-boxed.
cd "$(dirname "$0")"
export PYTHON=/opt/torch/.venv/bin/python
O=$OUT/run-j; mkdir -p $O
{ date -u; lscpu; echo; lscpu -p=CPU,CORE,SOCKET,NODE; nproc; cat /proc/loadavg
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,persistence_mode --format=csv; } > $O/host.txt 2>&1
PIN=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '!s[$2]++ && $2!=0 {print $1}' | head -4 | paste -sd,)
[ -n "$PIN" ] || PIN=4-7
echo "PIN_CPUS=$PIN" | tee -a $O/host.txt
LIB=$(realpath target/release/libofftrace_cuda.so)
export OMP_NUM_THREADS=4 MKL_NUM_THREADS=4
for n in 10 50; do
  CUDA_INJECTION64_PATH=$LIB OFFTRACE_CUDA_DUMP=$O/calls-$n.jsonl OFFTRACE_CUDA_ALL_CALLS=1 OFFTRACE_CUDA_DRIVER_API=1 \
    taskset -c $PIN timeout 90 $PYTHON examples/cuda/train.py --steps $n --warmup 0 > $O/calls-$n.log 2>&1
  grep '"t":"api"\|"t":"summary"' $O/calls-$n.jsonl > $O/calls-$n.api.jsonl; rm -f $O/calls-$n.jsonl
done
$PYTHON scripts/cuda/calls_per_step.py $O/calls-10.api.jsonl 10 $O/calls-50.api.jsonl 50 $O/calls-per-step.json > $O/calls-per-step.txt 2>&1
head -40 $O/calls-per-step.txt
OUT=$O PIN_CPUS=$PIN THREADS=4 MODES="untraced untraced_b record ab" REPS=12 STEPS=60 WARMUP=20 \
  AB_PHASES=0,1,2,3,4,5,6 AB_ROUNDS=8 AB_BLOCK=4 DEADLINE_S=300 timeout 400 scripts/cuda/overhead-ablation.sh > $O/run.log 2>&1
echo "rc=$?" >> $O/run.log
cat /proc/loadavg >> $O/host.txt
tail -60 $O/run.log
