#!/usr/bin/env bash
# Which part of `offtrace record` costs what on examples/cuda/train.py: interleaved fresh
# processes of untraced, `offtrace record` as is, without the 500 ms flusher
# (OFFTRACE_CUDA_FLUSH_MS=0), with torch.profiler's activity kinds only
# (OFFTRACE_CUDA_ACTIVITY=kernel,memcpy,memset,sync,marker), and torch.profiler; REPS times.
# Run from the repository root on the GPU machine after scripts/gpu-tests.sh's set-up
# (target/release/offtrace and libofftrace_cuda.so side by side). Results: $OUT/ablation-$SIZE.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${OFFTRACE_BIN:-target/release/offtrace}
PY=${PYTHON:-python3}
OUT=${OUT:-gpu-results}
REPS=${REPS:-4}
STEPS=${STEPS:-40}
SIZE=${SIZE:-base}
mkdir -p "$OUT"
o=$(mktemp -d)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
a=(examples/cuda/train.py --size "$SIZE" --steps "$STEPS" --warmup 10)
for r in $(seq 1 "$REPS"); do
  timeout 180 $PY "${a[@]}" --out "$o/untraced-$r.json" > /dev/null 2>&1
  timeout 180 "$BIN" record -o "$o/t.offtrace" -- $PY "${a[@]}" --out "$o/record-$r.json" > /dev/null 2>&1
  OFFTRACE_CUDA_FLUSH_MS=0 timeout 180 "$BIN" record -o "$o/t.offtrace" -- $PY "${a[@]}" \
    --out "$o/record_noflush-$r.json" > /dev/null 2>&1
  OFFTRACE_CUDA_ACTIVITY=kernel,memcpy,memset,sync,marker timeout 180 "$BIN" record -o "$o/t.offtrace" -- $PY "${a[@]}" \
    --out "$o/record_fewkinds-$r.json" > /dev/null 2>&1
  timeout 180 $PY "${a[@]}" --profile torch --out "$o/torch-$r.json" > /dev/null 2>&1
  echo "rep $r done ($(date -u +%T))"
done
$PY scripts/cuda/check.py overhead "$o" "$OUT/ablation-$SIZE.json"
