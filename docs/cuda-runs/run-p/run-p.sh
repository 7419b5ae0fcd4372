#!/usr/bin/env bash
# Runs P and Q (issue 14's final overhead measurement): scripts/cuda/overhead-ablation.sh with the
# modes untraced, untraced_b (noise floor), record (`offtrace record`, defaults), record_none
# (OFFTRACE_CUDA_API=none: CUPTI's activity records only, the floor of a CUPTI tracer) and torch
# (torch.profiler, CUDA activities); train.py --size base, 20 warm-up + 60 measured steps,
# OMP/MKL threads 4 in every process, time-boxed repetitions (DEADLINE_S). MODES overrides the
# modes (any of overhead-ablation.sh's), e.g. the callback split proposed in docs/cuda.md.
#   PIN=lscpu (run P, the method of runs I-O): every process under taskset -c on 4 vCPUs, one
#             per core, core 0 left out;
#   PIN=none  (run Q): no taskset, the processes placed by the scheduler on all vCPUs, as a user
#             runs `offtrace record -- python train.py`.
# One discarded untraced process first (page cache, GPU clocks), so the first repetition does not
# pay the machine's warm-up. Run from the bundle's root: OUT=... NAME=run-p PIN=lscpu ./run-p.sh
cd "$(dirname "$0")"
export PYTHON=/opt/torch/.venv/bin/python
NAME=${NAME:-run-p}
O=$OUT/$NAME
mkdir -p "$O"
PIN=${PIN:-lscpu}
if [ "$PIN" = lscpu ]; then
  PIN=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '!s[$2]++ && $2!=0 {print $1}' | head -4 | paste -sd,)
  [ -n "$PIN" ] || PIN=4-7
fi
[ "$PIN" = none ] && PIN=
pin=()
[ -n "$PIN" ] && pin=(taskset -c "$PIN")
{ date -u; lscpu; nproc; cat /proc/loadavg; echo "PIN_CPUS=${PIN:-none}";
  echo "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)";
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,pstate --format=csv; } > "$O/host.txt" 2>&1
OMP_NUM_THREADS=4 MKL_NUM_THREADS=4 "${pin[@]}" $PYTHON examples/cuda/train.py --size base --steps 10 \
  --warmup 5 --out "$O/warm-up.json" > /dev/null 2> "$O/warm-up.err"
OUT=$O PIN_CPUS=$PIN THREADS=4 MODES=${MODES:-untraced untraced_b record record_none torch} REPS=20 STEPS=60 \
  WARMUP=20 DEADLINE_S=${DEADLINE_S:-430} timeout 540 scripts/cuda/overhead-ablation.sh > "$O/run.log" 2>&1
echo "rc=$?" >> "$O/run.log"
rm -f "$O"/*.pt.trace.json
tail -32 "$O/run.log"
