#!/usr/bin/env bash
# Which part of `offtrace record` costs what on examples/cuda/train.py: fresh processes of each
# mode, interleaved (one of every mode per repetition, in a rotated order so no mode always runs
# right after another), REPS times. Each process reports its per-step times and the CPU its
# threads used in the measured window (train.py's "threads"). Run from the repository root on the
# GPU machine, with target/release/offtrace and libofftrace_cuda.so side by side.
#
#   MODES="untraced torch record" REPS=6 STEPS=40 scripts/cuda/overhead-ablation.sh
#
# Modes: untraced; torch (torch.profiler, CUDA activities, over the measured steps); record
# (`offtrace record`, defaults); record_none (OFFTRACE_CUDA_API=none: activity records only, no
# API callbacks); record_empty (OFFTRACE_CUDA_API=empty: the default callbacks, returning at
# once); ab (`offtrace record` of `train.py --ab $AB_PHASES`: the phases of
# offtrace_cuda_measure_phase alternated inside one process, AB_ROUNDS rounds of one settling
# step and AB_BLOCK timed steps per phase; overhead_stats.py compares each phase with phase 0
# of the same process); record_nolaunch (OFFTRACE_CUDA_LAUNCH_ARGS=0: no launch-time
# dispatch); record_runtime (OFFTRACE_CUDA_LAUNCH_ARGS=runtime: the dispatch from the runtime
# launch callbacks, each launch delivered once, run T's `record`); record_driver (=driver: the
# default, named); record_cbonly (launch callbacks
# enabled, nothing done in them); record_noargs
# (launch-time dispatch without kernel parameters); record_noapi (OFFTRACE_CUDA_API=0: no runtime
# callbacks); record_noflush (OFFTRACE_CUDA_FLUSH_MS=0); record_fewkinds (torch.profiler's
# activity kinds only); record_min (kernels, copies and memsets only: the default since run E3);
# record_all (every activity kind); record_devbuf (OFFTRACE_CUDA_DEVICE_BUFFER_MB=$DEVBUF_MB);
# record_main (`offtrace record` with another build, $OFFTRACE_BIN_MAIN with its
# libofftrace_cuda.so beside it: two builds side by side in one rotation); inject (the
# injection without a trace: CUPTI and its callbacks, no records). Results: $OUT/ablation-$SIZE.json
# and the per-process JSON in $OUT/ablation-$SIZE/. untraced_b is a second untraced process per
# repetition: untraced_b against untraced is the noise floor of the method.
#
# Placement, the same for every mode (run I): PIN_CPUS="4-7" runs every process (the `offtrace`
# parent, Python and all their threads) under `taskset -c $PIN_CPUS`; THREADS=4 sets
# OMP_NUM_THREADS / MKL_NUM_THREADS (PyTorch's intra-op pool); WARMUP (default 10) steps before
# the window; DEADLINE_S stops starting repetitions after that many seconds (the last one
# finishes), so a time-boxed device run keeps what it measured.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${OFFTRACE_BIN:-target/release/offtrace}
LIB=$(realpath "${OFFTRACE_CUDA_LIB:-target/release/libofftrace_cuda.so}")
PY=${PYTHON:-python3}
OUT=${OUT:-gpu-results}
REPS=${REPS:-4}
STEPS=${STEPS:-40}
SIZE=${SIZE:-base}
MODES=${MODES:-untraced torch record record_nolaunch}
mkdir -p "$OUT"
o="$OUT/ablation-$SIZE"
mkdir -p "$o"
t=$(mktemp -d)
export OFFTRACE_CUDA_STATS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
WARMUP=${WARMUP:-10}
a=(examples/cuda/train.py --size "$SIZE" --steps "$STEPS" --warmup "$WARMUP")
pin=()
if [ -n "${PIN_CPUS:-}" ]; then pin=(taskset -c "$PIN_CPUS"); fi
if [ -n "${THREADS:-}" ]; then export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS; fi
run_mode() { # mode rep
  local m=$1 r=$2 out="$o/$1-$2.json"
  local rec=("${pin[@]}" timeout 180 "$BIN" record -o "$t/t.offtrace" --)
  local py=("${pin[@]}" timeout 180 $PY)
  case $m in
    untraced | untraced_b) "${py[@]}" "${a[@]}" --out "$out" ;;
    torch) "${py[@]}" "${a[@]}" --profile torch --out "$out" ;;
    record) "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    record_main) "${pin[@]}" timeout 180 "$OFFTRACE_BIN_MAIN" record -o "$t/t.offtrace" -- $PY "${a[@]}" --out "$out" ;;
    record_nolaunch) OFFTRACE_CUDA_LAUNCH_ARGS=0 "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    record_driver) OFFTRACE_CUDA_LAUNCH_ARGS=driver "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    record_runtime) OFFTRACE_CUDA_LAUNCH_ARGS=runtime "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    record_cbonly) OFFTRACE_CUDA_LAUNCH_ARGS=callbacks "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    record_noargs) OFFTRACE_CUDA_LAUNCH_ARGS=noargs "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    record_noapi) OFFTRACE_CUDA_API=0 "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    record_none) OFFTRACE_CUDA_API=none "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    record_empty) OFFTRACE_CUDA_API=empty "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    ab) "${rec[@]}" $PY "${a[@]}" --ab "${AB_PHASES:-0,1,2,3,4,5,6}" --ab-rounds "${AB_ROUNDS:-8}" \
      --ab-block "${AB_BLOCK:-4}" --out "$out" ;;
    record_noflush) OFFTRACE_CUDA_FLUSH_MS=0 "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    record_fewkinds) OFFTRACE_CUDA_ACTIVITY=kernel,memcpy,memset,sync,marker "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    record_min) OFFTRACE_CUDA_ACTIVITY=kernel,memcpy,memset "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    record_all) OFFTRACE_CUDA_ACTIVITY=all "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    record_devbuf) OFFTRACE_CUDA_DEVICE_BUFFER_MB=${DEVBUF_MB:-32} "${rec[@]}" $PY "${a[@]}" --out "$out" ;;
    inject) CUDA_INJECTION64_PATH="$LIB" NVTX_INJECTION64_PATH="$LIB" "${py[@]}" "${a[@]}" --out "$out" ;;
    *) echo "unknown mode $m"; return 1 ;;
  esac > /dev/null 2> "$o/$m-$r.err" || { echo "FAILED: $m rep $r"; tail -3 "$o/$m-$r.err"; }
}
read -ra modes <<< "$MODES"
n=${#modes[@]}
start=$SECONDS
for r in $(seq 1 "$REPS"); do
  if [ -n "${DEADLINE_S:-}" ] && [ $((SECONDS - start)) -ge "$DEADLINE_S" ]; then
    echo "deadline: stopped after $((r - 1)) repetitions"
    break
  fi
  for i in $(seq 0 $((n - 1))); do
    run_mode "${modes[$(((i + r - 1) % n))]}" "$r"
  done
  echo "rep $r done ($(date -u +%T))"
done
$PY scripts/cuda/check.py overhead "$o" "$OUT/ablation-$SIZE.json"
$PY scripts/cuda/overhead_stats.py "$o" "$OUT/stats-$SIZE.json"
# One file back instead of two per process; torch.profiler's Chrome traces (20+ MB each) stay
# unless KEEP_TORCH_TRACES=1.
[ "${KEEP_TORCH_TRACES:-0}" = 1 ] || rm -f "$o"/*.torch.json
tar -C "$OUT" -czf "$OUT/ablation-$SIZE.tar.gz" "ablation-$SIZE" && rm -rf "$o"
