#!/usr/bin/env bash
# Run M (s3-cudalaunch): run L's overhead method on this branch's build, with main's build
# (9f072fb, the build of runs J-L) as a fifth mode in the same interleaved rotation
# (record_main: main/offtrace with main/libofftrace_cuda.so beside it), then the GPU suite's
# steps 1, 2 and 4 (CUDA C workload, torch.profiler comparison, `offtrace record` traces checked
# against the backend's own dump, allocation properties included) on this branch's build with
# the time left.
cd "$(dirname "$0")"
export PYTHON=/opt/torch/.venv/bin/python
O=$OUT/run-m; mkdir -p $O
start=$SECONDS
PIN=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '!s[$2]++ && $2!=0 {print $1}' | head -4 | paste -sd,)
[ -n "$PIN" ] || PIN=4-7
{ date -u; lscpu; nproc; cat /proc/loadavg; echo "PIN_CPUS=$PIN"; } > $O/host.txt 2>&1
OUT=$O PIN_CPUS=$PIN THREADS=4 MODES="untraced untraced_b record record_main torch" REPS=12 STEPS=60 WARMUP=20 \
  OFFTRACE_BIN_MAIN=$PWD/main/offtrace DEADLINE_S=${DEADLINE_S:-260} timeout 380 scripts/cuda/overhead-ablation.sh > $O/run.log 2>&1
echo "rc=$? ($((SECONDS - start)) s)" >> $O/run.log
left=$((400 - (SECONDS - start)))
if [ "$left" -gt 40 ]; then
  OUT=$O/gpu ONLY="1 2 4" timeout "$left" scripts/gpu-tests.sh > $O/gpu-tests.log 2>&1
  echo "gpu-tests rc=$? ($((SECONDS - start)) s)" >> $O/gpu-tests.log
  rm -f $O/gpu/runs.tar.gz
else
  echo "gpu-tests skipped: $left s left" > $O/gpu-tests.log
fi
tar -C $OUT -czf $OUT/run-m.tar.gz run-m
grep -E '^(ok|FAIL)|FAILED|gpu-tests' $O/gpu-tests.log | tail -20
tail -30 $O/run.log
