#!/usr/bin/env bash
# Run L (s3-cudaoh): the GPU suite's functional steps (1-4: CUDA C workload, torch.profiler
# comparison, coexistence, offtrace record with the C tool and the reports) on this branch's
# build, then more repetitions of run K's overhead modes (untraced, untraced_b, record, torch)
# with the time left. Everything comes back as one tarball plus the logs.
cd "$(dirname "$0")"
export PYTHON=/opt/torch/.venv/bin/python
O=$OUT/run-l; mkdir -p $O
start=$SECONDS
OUT=$O/gpu ONLY="1 2 3 4" timeout 260 scripts/gpu-tests.sh > $O/gpu-tests.log 2>&1
echo "gpu-tests rc=$? ($((SECONDS - start)) s)" >> $O/gpu-tests.log
rm -f $O/gpu/runs.tar.gz
PIN=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '!s[$2]++ && $2!=0 {print $1}' | head -4 | paste -sd,)
[ -n "$PIN" ] || PIN=4-7
{ date -u; lscpu; nproc; cat /proc/loadavg; echo "PIN_CPUS=$PIN"; } > $O/host.txt 2>&1
left=$((380 - (SECONDS - start)))
OUT=$O PIN_CPUS=$PIN THREADS=4 MODES="untraced untraced_b record torch" REPS=14 STEPS=60 WARMUP=20 \
  DEADLINE_S=$left timeout $((left + 90)) scripts/cuda/overhead-ablation.sh > $O/run.log 2>&1
echo "rc=$?" >> $O/run.log
tar -C $OUT -czf $OUT/run-l.tar.gz run-l
grep -E '^(ok|FAIL)|FAILED|gpu-tests' $O/gpu-tests.log | tail -40
tail -22 $O/run.log
