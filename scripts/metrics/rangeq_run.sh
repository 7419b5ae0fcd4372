#!/bin/bash
# Runs on the accelerator machine from a bundle folder (scripts/cuda/bundle.sh plus
# target/release/cupti_kernels, scripts/metrics/rangeq_*.{sh,py}, compare_cupti_ncu.py and the
# ncu CSVs of docs/metrics-evidence/cupti/): `offtrace record --query-metrics cupti.range_profiler`
# on the `cupti_kernels` example (`plain 5`: warm-up saxpy + fma_loop(100), then 5 x saxpy,
# fma_loop(20000), the kernels of docs/metrics.md's ncu table) and on examples/cuda/workload.cu
# (streams, copies, a CUDA graph), each beside a control recording and an untraced run of the
# same program (exit code, output); a long run in batches (OFFTRACE_RANGEQ_MAX_RANGES=64); each
# report's command_metrics rows, the per-range log (OFFTRACE_RANGEQ_LOG) and the per-kernel
# values against ncu's. Results under $OUT.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda-13.0/bin:$PATH
B=target/release
LOG=/tmp/rangeq-log.txt
now() { date +%s%N; }
# run NAME TIMEOUT ENV... -- CMD...: stdout+stderr to $OUT/NAME.txt, rc and seconds to the log.
run() {
  local name=$1 limit=$2; shift 2
  local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  local t0; t0=$(now)
  env "${envs[@]}" timeout -k 5 "$limit" "$@" > "$OUT/$name.txt" 2>&1; local rc=$?
  echo "== $name: rc $rc, $(( ($(now) - t0) / 1000000 )) ms: ${envs[*]} $*"
}
report() { timeout 60 $B/offtrace report "$OUT/$1.offtrace" --format json > "$OUT/$1-report.json" 2>"$OUT/$1-report.err"
  timeout 60 $B/offtrace report "$OUT/$1.offtrace" > "$OUT/$1-report.txt" 2>&1; }
Q=(--query-metrics cupti.range_profiler)
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ls -la /usr/local/cuda/lib64/libcupti.so* /usr/local/cuda-13.0/extras/CUPTI/lib64/libcupti.so* 2>&1
ls /usr/local/cuda-13.0/extras/CUPTI/samples/ 2>&1 | tr '\n' ' '; echo
nvcc -O2 -arch=sm_90 -cudart shared -o /tmp/workload examples/cuda/workload.cu || echo "nvcc failed"

command -v gdb || echo "no gdb"
run ck-untraced 60 A=1 -- $B/cupti_kernels plain 5
run ck-control 60 A=1 -- $B/offtrace record -o "$OUT/ck-control.offtrace" -- $B/cupti_kernels plain 5
run ck-range 90 OFFTRACE_RANGEQ_LOG="$OUT/ck-range-ranges.log" -- \
  $B/offtrace record -o "$OUT/ck-range.offtrace" "${Q[@]}" -- $B/cupti_kernels plain 5
tail -3 "$OUT/ck-range.txt"
run wl-untraced 60 A=1 -- /tmp/workload
run wl-control 60 A=1 -- $B/offtrace record -o "$OUT/wl-control.offtrace" -- /tmp/workload
run wl-range 120 OFFTRACE_RANGEQ_LOG="$OUT/wl-range-ranges.log" -- \
  $B/offtrace record -o "$OUT/wl-range.offtrace" "${Q[@]}" -- /tmp/workload
tail -3 "$OUT/wl-range.txt"; grep "^#" "$OUT/wl-range-ranges.log"
# A PyTorch program (cuBLAS and PyTorch's own kernels, launched by the runtime and libraries).
PY=/opt/torch/.venv/bin/python
TORCH='import torch
torch.manual_seed(0)
x = torch.randn(2048, 2048, device="cuda")
for i in range(5):
    y = torch.relu(x @ x) + 1.0
torch.cuda.synchronize()
print("torch ok", round(float(y.mean()), 1))'
if [ -x $PY ]; then
  run torch-untraced 120 A=1 -- $PY -c "$TORCH"
  run torch-control 120 A=1 -- $B/offtrace record -o "$OUT/torch-control.offtrace" -- $PY -c "$TORCH"
  run torch-range 180 OFFTRACE_RANGEQ_LOG="$OUT/torch-range-ranges.log" -- \
    $B/offtrace record -o "$OUT/torch-range.offtrace" "${Q[@]}" -- $PY -c "$TORCH"
  tail -3 "$OUT/torch-range.txt"; grep "^# \(CUPTI\|started\|exit\|context\)" "$OUT/torch-range-ranges.log"
fi
run ck-batches 120 OFFTRACE_RANGEQ_MAX_RANGES=64 OFFTRACE_RANGEQ_LOG="$OUT/ck-batches-ranges.log" -- \
  $B/offtrace record -o "$OUT/ck-batches.offtrace" "${Q[@]}" -- $B/cupti_kernels plain 40
tail -2 "$OUT/ck-batches.txt"
for r in ck-control ck-range wl-control wl-range ck-batches torch-control torch-range; do report $r; done
echo "== program output: untraced vs recorded with the range profiler (offtrace's own lines removed)"
for p in ck wl torch; do
  diff <(grep -v '^offtrace' "$OUT/$p-untraced.txt") <(grep -v '^offtrace' "$OUT/$p-range.txt") > /dev/null \
    && echo "$p: same output" || { echo "$p: output differs"; diff <(grep -v '^offtrace' "$OUT/$p-untraced.txt") <(grep -v '^offtrace' "$OUT/$p-range.txt") | head; }
done
for p in ck wl; do
  echo "== $p: check"
  python3 scripts/metrics/rangeq_check.py "$OUT/$p-range-report.json" "$OUT/$p-control-report.json" \
    "$OUT/$p-range-ranges.log" "$OUT/$p-ours.csv" 2>&1 | grep -v "^log #  *[0-9]" | head -60
done
echo "== torch: check"
python3 scripts/metrics/rangeq_check.py "$OUT/torch-range-report.json" "$OUT/torch-control-report.json" \
  "$OUT/torch-range-ranges.log" 2>&1 | grep -v "^log # batch" | head -40
echo "== device activity with device times (count, device_count): control | range profiler"
python3 - "$OUT/wl-control-report.json" "$OUT/wl-range-report.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
kb = {(x["kind"], x["name"]): (x["count"], x["device_count"]) for x in b.get("device_activity", [])}
for x in a.get("device_activity", []):
    print(f'  {x["kind"]:16} {x["name"][:40]:40} {(x["count"], x["device_count"])} | {kb.get((x["kind"], x["name"]))}')
PY
echo "== batches"
python3 scripts/metrics/rangeq_check.py "$OUT/ck-batches-report.json" "$OUT/ck-control-report.json" \
  "$OUT/ck-batches-ranges.log" 2>&1 | grep -v "^log #  *[0-9]" | head -40
echo "== per-kernel values vs ncu (ncu-nocache: clocks and caches as the app left them; ncu-default)"
python3 scripts/metrics/compare_cupti_ncu.py "$OUT/ck-ours.csv" ncu/ncu-nocache.csv ncu/ncu-default.csv
} > "$LOG" 2>&1
rm -f "$OUT"/*.offtrace.cuda
# Only a few files come back from the device machine: everything else in one archive.
(cd "$OUT" && tar czf /tmp/rangeq-all.tar.gz . && rm -rf ./* && mv /tmp/rangeq-all.tar.gz all.tar.gz)
cp "$LOG" "$OUT/log.txt" 2>/dev/null
cat "$OUT/log.txt"
