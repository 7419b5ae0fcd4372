#!/usr/bin/env bash
# Run Z (s13): examples/cuda/review.py (torch.compile, several streams, the caching allocator)
# under `offtrace record` and, in a second process, under torch.profiler over the same window.
# Runs from a bundle (scripts/cuda/bundle.sh DEST, plus scripts/review/check_pftrace.py); OUT
# is where the results go. On the device:  cd .gpu-s13-cudarev && OUT=$OUT ./run-z.sh
set -u
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
DEST=${OUT:-out}
O=$(mktemp -d)  # everything, packed into $DEST/run-z.tar.gz at the end (the device returns few files)
BIN=target/release/offtrace
mkdir -p "$O"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  $PY -c 'import triton; print("triton", triton.__version__)'
  command -v cc gcc; cc --version | head -1
} > "$O/machine.txt" 2>&1
cat "$O/machine.txt"
# A fresh Inductor cache: the recorded process compiles (Triton, autotuning) as a user's first run.
export TORCHINDUCTOR_CACHE_DIR=$PWD/inductor-cache TRITON_CACHE_DIR=$PWD/triton-cache
rm -rf inductor-cache triton-cache
rec() {
  OFFTRACE_CUDA_ACTIVITY=kernel,memcpy,memset,sync,marker OFFTRACE_CUDA_DUMP="$O/dump.jsonl" \
    timeout 300 $BIN record -o "$O/review.offtrace" -- $PY examples/cuda/review.py --out "$O/record.json" \
    > "$O/record.log" 2>&1
}
echo "=== record (cold cache) $(date -u +%T)"
rec; rc=$?; echo "record rc $rc"
if [ $rc -ne 0 ]; then
  cp "$O/record.log" "$O/record-cold-failed.log"
  echo "=== record again (warm cache, TORCHINDUCTOR_COMPILE_THREADS=1)"
  rm -f "$O/dump.jsonl"; TORCHINDUCTOR_COMPILE_THREADS=1 rec; echo "record rc $?"
fi
tail -5 "$O/record.log"
echo "=== torch.profiler (warm cache) $(date -u +%T)"
timeout 240 $PY examples/cuda/review.py --profile torch --out "$O/torch.json" > "$O/torch.log" 2>&1; echo "torch rc $?"
echo "=== report / export / checks $(date -u +%T)"
$BIN report "$O/review.offtrace" > "$O/report.txt" 2>&1
$BIN report --format json "$O/review.offtrace" > "$O/report.json" 2>"$O/report-json.err"
$BIN export "$O/review.offtrace" --format perfetto -o "$O/review.pftrace" > "$O/export.log" 2>&1; echo "export rc $?"
$PY scripts/review/check_pftrace.py "$O/review.pftrace" --tracks > "$O/pftrace-check.txt" 2>&1; echo "pftrace check rc $?"
TRACE_JSONL_CALLS=1 target/release/trace_jsonl "$O/review.offtrace" > "$O/trace.jsonl"
$PY scripts/cuda/check.py trace "$O/trace.jsonl" "$O/dump.jsonl" train > "$O/check-trace.txt" 2>&1; echo "check trace rc $?"
$PY scripts/cuda/check.py compare "$O/dump.jsonl" "$O/torch.json.torch.json" "$O/compare.json" > "$O/check-compare.txt" 2>&1
echo "check compare rc $?"
$BIN export "$O/review.offtrace" --format csv -o "$O/csv" > /dev/null 2>&1
$PY scripts/cuda/review_check.py "$O/csv" "$O/record.json" "$O/torch.json.torch.json" > "$O/review-check.txt" 2>&1
echo "review_check rc $?"; cat "$O/review-check.txt"
tail -n 3 "$O/check-trace.txt" "$O/check-compare.txt"
ls -la "$O"
mkdir -p "$DEST"
tar -C "$O" -czf "$DEST/run-z.tar.gz" .
cp "$O/report.txt" "$O/check-trace.txt" "$O/check-compare.txt" "$O/review-check.txt" "$DEST/"
