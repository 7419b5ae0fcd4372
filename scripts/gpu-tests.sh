#!/usr/bin/env bash
# The GPU test suite of offtrace's CUDA backend, in one command, on a machine with an NVIDIA GPU,
# CUDA 13 (nvcc, CUPTI) and PyTorch built for CUDA 13. Nothing here is built with Rust: build
# first where cargo is (`cargo build --release -p offtrace-cuda -p offtrace-cli`) and bring
# target/release/libofftrace_cuda.so (and the offtrace binary) along.
#
#   scripts/gpu-tests.sh            # from the repository root (or a copy of it)
#
# Environment: OFFTRACE_CUDA_LIB (default target/release/libofftrace_cuda.so), OFFTRACE_BIN
# (default target/release/offtrace; optional), PYTHON (default python3), OUT (results folder,
# default gpu-results), REPS (interleaved overhead repetitions, default 5), STEPS (default 30).
#
# What it runs (each check prints ok/FAIL; the exit status is 1 when any failed):
#   1. examples/cuda/workload.cu built with nvcc, run untraced and with the injection: every
#      kernel, copy and memset with device times, counts equal to what the program launched,
#      the graph's nodes and edges, kernel allocation properties, synchronisation records; every
#      kernel named by a loaded module's cubin (module_check.py, also in 2).
#   2. examples/cuda/train.py with the injection, and again under torch.profiler: the same
#      kernel names with the same count, GPU time per name, the same copies (check.py compare).
#   3. the same program starting torch.profiler itself while offtrace is injected: who gets
#      CUPTI, what each recorded, no crash (check.py coexist).
#   5. `offtrace record` on both workloads (typed traces equal to the backend's own dump of the
#      same process; allocation properties, task graph, drops/overhead info), with a tool
#      written against offtrace.h (examples/cuda/cuda_tool.c) receiving CUDA API callbacks and
#      buffered kernel records; when OFFTRACE_BIN is there.
#   5. overhead per step: untraced, `offtrace record`, `offtrace record` without launch
#      callbacks (OFFTRACE_CUDA_LAUNCH_ARGS=0), torch.profiler, interleaved REPS times, for the
#      "base" and "small" model sizes.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
LIB=$(realpath "${OFFTRACE_CUDA_LIB:-target/release/libofftrace_cuda.so}")
BIN=${OFFTRACE_BIN:-target/release/offtrace}
PY="timeout 180 ${PYTHON:-python3}"
OUT=${OUT:-gpu-results}
REPS=${REPS:-5}
STEPS=${STEPS:-30}
mkdir -p "$OUT"
W=$(mktemp -d)
fails=0
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
# ONLY="1 5": run only these steps (step 1, which builds the CUDA program, always runs).
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
note_fail() { echo "FAILED: $*"; fails=$((fails + 1)); }
inject() { CUDA_INJECTION64_PATH="$LIB" NVTX_INJECTION64_PATH="$LIB" timeout 180 "$@"; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# Steps 1-3 read synchronisation, NVTX markers ("window") and memory records from the dump:
# every activity kind there (the default has kernels, copies and memsets only).

step "machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
nvcc --version | tail -1
${PYTHON:-python3} -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
ls -la "$LIB"

step "1. CUDA C workload"
nvcc -O2 -arch=sm_90 -cudart shared -lineinfo -o "$W/workload" examples/cuda/workload.cu || note_fail "nvcc"
timeout 60 "$W/workload" > "$W/workload-untraced.json" || note_fail "workload untraced"
cat "$W/workload-untraced.json"
OFFTRACE_CUDA_ACTIVITY=all OFFTRACE_CUDA_DUMP="$W/workload.jsonl" inject "$W/workload" > "$W/workload-traced.json" 2> "$W/workload.err" \
  || note_fail "workload traced"
cat "$W/workload.err"
$PY scripts/cuda/check.py workload "$W/workload.jsonl" "$W/workload-traced.json" || note_fail "workload checks"
$PY scripts/cuda/module_check.py "$W/workload.jsonl" || note_fail "workload modules name their kernels"
if [ -x target/release/cuda-tests ]; then
  echo "--- Rust tests that need CUDA (cargo test -p offtrace-cuda --test injection -- --ignored, built elsewhere)"
  OFFTRACE_GPU_WORKLOAD="$W/workload" OFFTRACE_CUDA_LIB="$LIB" timeout 120 target/release/cuda-tests --ignored \
    || note_fail "Rust GPU tests"
fi

if want 2; then
step "2. PyTorch workload: offtrace vs torch.profiler"
OFFTRACE_CUDA_ACTIVITY=all OFFTRACE_CUDA_DUMP="$W/train.jsonl" inject $PY examples/cuda/train.py --steps 10 --warmup 3 --out "$W/train-offtrace.json" \
  2> "$W/train.err" || note_fail "train.py traced"
tail -5 "$W/train.err"
$PY examples/cuda/train.py --steps 10 --warmup 3 --profile torch --out "$W/train-torch.json" 2> "$W/train-torch.err" \
  || note_fail "train.py torch.profiler"
$PY scripts/cuda/check.py compare "$W/train.jsonl" "$W/train-torch.json.torch.json" "$OUT/compare.json" \
  || note_fail "torch.profiler comparison"
$PY scripts/cuda/module_check.py "$W/train.jsonl" || note_fail "train.py modules name their kernels"

fi
if want 3; then
step "3. offtrace injected, the program starts torch.profiler"
OFFTRACE_CUDA_ACTIVITY=all OFFTRACE_CUDA_DUMP="$W/coexist.jsonl" inject $PY examples/cuda/train.py --steps 10 --warmup 3 --profile torch \
  --out "$W/coexist.json" 2> "$W/coexist.err"
echo "exit status: $?"
$PY scripts/cuda/check.py coexist "$W/coexist.jsonl" "$W/coexist.json.torch.json" "$W/coexist.err" "$OUT/coexist.json"

fi
if [ -x "$BIN" ] && want 4; then
  step "4. offtrace record: typed traces, a tool written against offtrace.h"
  cc -shared -fPIC -O2 -I crates/offtrace-capi/include examples/cuda/cuda_tool.c -o "$W/libcuda_tool.so" || note_fail "cc cuda_tool"
  OFFTRACE_CUDA_DUMP="$W/rec-workload.jsonl" timeout 120 "$BIN" record -o "$W/workload.offtrace" --tool "$W/libcuda_tool.so" \
    -- "$W/workload" > "$W/rec-workload.out" 2> "$W/rec-workload.err" || note_fail "offtrace record workload"
  cat "$W/rec-workload.err"
  ${PYTHON:-python3} scripts/cuda/check.py tool "$W/rec-workload.out" program || note_fail "cuda_tool checks"
  target/release/trace_jsonl "$W/workload.offtrace" > "$W/workload.trace.jsonl" || note_fail "trace_jsonl workload"
  ${PYTHON:-python3} scripts/cuda/check.py trace "$W/workload.trace.jsonl" "$W/rec-workload.jsonl" workload || note_fail "workload trace checks"
  OFFTRACE_CUDA_DUMP="$W/rec-train.jsonl" timeout 180 "$BIN" record -o "$W/train.offtrace" \
    -- ${PYTHON:-python3} examples/cuda/train.py --steps 5 --warmup 2 2> "$W/rec-train.err" || note_fail "offtrace record train"
  cat "$W/rec-train.err" | tail -3
  TRACE_JSONL_CALLS=1 target/release/trace_jsonl "$W/train.offtrace" > "$W/train.trace.jsonl" || note_fail "trace_jsonl train"
  ${PYTHON:-python3} scripts/cuda/check.py trace "$W/train.trace.jsonl" "$W/rec-train.jsonl" train || note_fail "train trace checks"
  timeout 120 "$BIN" report "$W/workload.offtrace" > "$OUT/workload-report.txt" 2>&1; head -60 "$OUT/workload-report.txt"
  timeout 120 "$BIN" report "$W/train.offtrace" > "$OUT/train-report.txt" 2>&1; head -80 "$OUT/train-report.txt"
  # The report's commands against what ran: graph launches' kernels each counted, launches
  # captured into a graph not counted as commands.
  timeout 120 "$BIN" report --format json "$W/workload.offtrace" > "$W/workload-report.json" || note_fail "report json workload"
  ${PYTHON:-python3} scripts/cuda/check.py report "$W/workload-report.json" "$W/rec-workload.out" || note_fail "workload report checks"
  timeout 120 "$BIN" report --format json "$W/train.offtrace" > "$W/train-report.json" || note_fail "report json train"
  ${PYTHON:-python3} scripts/cuda/check.py report_timed "$W/train-report.json" || note_fail "train report checks"
fi

want 5 && for size in ${SIZES:-base small}; do
  step "5. overhead ($size), interleaved x$REPS: untraced / offtrace record / record without launch callbacks / torch.profiler"
  o="$W/ovh-$size"
  mkdir -p "$o"
  for r in $(seq 1 "$REPS"); do
    a=(examples/cuda/train.py --size "$size" --steps "$STEPS" --warmup 10)
    $PY "${a[@]}" --out "$o/untraced-$r.json" > /dev/null 2>&1
    $PY "${a[@]}" --profile torch --out "$o/torch-$r.json" > /dev/null 2>&1
    if [ -x "$BIN" ]; then
      timeout 180 "$BIN" record -o "$W/ovh.offtrace" -- ${PYTHON:-python3} "${a[@]}" --out "$o/record-$r.json" > /dev/null 2>&1
    fi
    if [ -x "$BIN" ]; then
      OFFTRACE_CUDA_LAUNCH_ARGS=0 timeout 180 "$BIN" record -o "$W/ovh.offtrace" -- ${PYTHON:-python3} "${a[@]}" \
        --out "$o/record_nolaunch-$r.json" > /dev/null 2>&1
    fi
  done
  $PY scripts/cuda/check.py overhead "$o" "$OUT/overhead-$size.json" || note_fail "overhead $size"
done

tar -C "$W" -czf "$OUT/runs.tar.gz" --exclude='ovh.offtrace' --exclude='*.offtrace' . 2>/dev/null
cp "$W"/workload.offtrace "$OUT/" 2>/dev/null
echo
echo "gpu-tests: $fails failed step(s); results in $OUT"
[ "$fails" -eq 0 ]
