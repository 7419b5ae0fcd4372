#!/usr/bin/env bash
# Stress loop for the rare deadlock of Intel's OpenCL CPU runtime under several threads waiting on
# out-of-order queues (docs/testing.md, docs/history/hang-2026-11-26-query-metrics.md): runs
# examples/sycl/threads_queues.py, or the plain OpenCL reproducer scripts/hang/ooo_wait.c, N
# times in each configuration, interleaved (one run of each
# configuration per round, so that the machine's load hits all of them alike), and counts the
# runs that did not end within the time limit. A hung run's threads are dumped with gdb
# (`thread apply all bt`) into OUT/hang-<config>-<round>.bt before its process group is killed.
#
# Configurations (a comma-separated list; default metrics,record,bare,layer):
#   metrics  offtrace record --intel-opencl --query-metrics cpu.sw (the tier-2 test's command)
#   record   offtrace record --intel-opencl (no metrics)
#   bare     the program alone, with the runtime environment offtrace gives it with
#            --intel-opencl (LD_LIBRARY_PATH, OCL_ICD_FILENAMES, OCL_ICD_VENDORS with the system's
#            ICDs and Intel's runtime)
#   layer    the program with the OpenCL layer alone (OPENCL_LAYERS=libofftrace_opencl.so,
#            no XPTI subscriber), same runtime environment
#   layer:PATH  the same with the layer library at PATH (a copy of an earlier build: A/B runs)
#   inert    the OpenCL layer loaded but recording nothing (no OFFTRACE_OUTPUT): every call goes
#            through it and its queues get profiling, but no command gets an event callback,
#            retain or FIFO entry
#   ooo      scripts/hang/ooo_wait.c (plain OpenCL, no SYCL, no offtrace: the same waits on
#            out-of-order queues), built into OUTDIR, THREADS threads, ITERATIONS iterations
#   ooo-p    the same with CL_QUEUE_PROFILING_ENABLE on every queue (as the layer makes them)
#   ooo-cbU  the same with profiling on and a completion callback on every out-of-order
#            command that reads its profiling times and spins U µs (ooo-cb0, ooo-cb200):
#            what a tracer's completion callback adds, without a tracer
#   ooo-layer, ooo-layer:PATH  ooo_wait (no callbacks of its own) under the OpenCL layer,
#            recording (the layer's completion callbacks instead of ooo-cbU's)
#
# usage: scripts/stress-hang.sh [-n RUNS] [-c CONFIGS] [-t THREADS] [-i ITERATIONS]
#                               [-l LIMIT_S] [-o OUTDIR] [-p PROFILE] [-b]
#   -p  the cargo profile whose build is run: release (default) or debug (the tier-2 tests')
#   -b  a busy loop (nice 19) beside the runs, to perturb the timing
# Prints one line per run (config, round, seconds, exit status or HANG) and a summary
# `config: H hangs, F failures in N runs`. Needs that build
# (cargo build [--release] -p offtrace-cli -p offtrace-agent -p offtrace-opencl) and the SYCL
# venv (OFFTRACE_SYCL_VENV, default <repo>/.venv).
set -uo pipefail
# One compound command, read whole before it runs: the script may be edited while a loop runs.
{
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=10 configs=metrics,record,bare,layer threads=4 iterations=10 limit=120 busy=0 profile=release
out=/tmp/offtrace-stress-hang
while getopts n:c:t:i:l:o:p:b opt; do
  case $opt in
    n) runs=$OPTARG ;; c) configs=$OPTARG ;; t) threads=$OPTARG ;; i) iterations=$OPTARG ;;
    l) limit=$OPTARG ;; o) out=$OPTARG ;; p) profile=$OPTARG ;; b) busy=1 ;;
    *) sed -n '2,37p' "$0" >&2; exit 2 ;;
  esac
done
venv=${OFFTRACE_SYCL_VENV:-$here/.venv}
bin=$here/target/$profile
lib=$venv/lib
for f in "$bin/offtrace" "$bin/libofftrace_opencl.so" "$venv/bin/python" "$lib/libintelocl.so"; do
  [ -e "$f" ] || { echo "stress-hang: missing $f" >&2; exit 2; }
done
mkdir -p "$out"
icd=$out/icd
mkdir -p "$icd"
cp /etc/OpenCL/vendors/*.icd "$icd/" 2>/dev/null
echo "$lib/libintelocl.so" >"$icd/offtrace-sycl-runtime.icd"
prog=("$venv/bin/python" "$here/examples/sycl/threads_queues.py" "$threads" "$iterations")
runtime_env=(LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  OCL_ICD_FILENAMES="$lib/libintelocl.so" OCL_ICD_VENDORS="$icd")

if [[ ,$configs, == *,ooo* ]]; then
  cc -O2 -pthread -o "$out/ooo_wait" "$here/scripts/hang/ooo_wait.c" -lOpenCL || exit 2
fi
busy_pid=
cleanup() {
  [ -n "$busy_pid" ] && kill "$busy_pid" 2>/dev/null
  rm -rf "$icd" "$out"/trace-*
}
trap cleanup EXIT
if [ "$busy" = 1 ]; then
  nice -n 19 bash -c 'while :; do :; done' &
  busy_pid=$!
fi

# Runs one configuration once in a process group of its own; prints its line.
run_one() {
  local config=$1 round=$2 tag=${1//[^A-Za-z0-9-]/_}
  local trace=$out/trace-$tag-$2.offtrace
  local -a cmd
  case $config in
    metrics) cmd=("$bin/offtrace" record --intel-opencl --runtime "$venv" --query-metrics cpu.sw -o "$trace" -- "${prog[@]}") ;;
    record) cmd=("$bin/offtrace" record --intel-opencl --runtime "$venv" -o "$trace" -- "${prog[@]}") ;;
    bare) cmd=(env "${runtime_env[@]}" "${prog[@]}") ;;
    layer) cmd=(env "${runtime_env[@]}" OPENCL_LAYERS="$bin/libofftrace_opencl.so" OFFTRACE_OUTPUT="$trace"
      "${prog[@]}") ;;
    layer:*) cmd=(env "${runtime_env[@]}" OPENCL_LAYERS="${config#layer:}" OFFTRACE_OUTPUT="$trace" "${prog[@]}") ;;
    ooo) cmd=(env "${runtime_env[@]}" "$out/ooo_wait" "$threads" "$iterations") ;;
    ooo-p) cmd=(env "${runtime_env[@]}" "$out/ooo_wait" -p "$threads" "$iterations") ;;
    ooo-layer) cmd=(env "${runtime_env[@]}" OPENCL_LAYERS="$bin/libofftrace_opencl.so" OFFTRACE_OUTPUT="$trace"
      "$out/ooo_wait" "$threads" "$iterations") ;;
    ooo-layer:*) cmd=(env "${runtime_env[@]}" OPENCL_LAYERS="${config#ooo-layer:}" OFFTRACE_OUTPUT="$trace"
      "$out/ooo_wait" "$threads" "$iterations") ;;
    ooo-cb*) cmd=(env "${runtime_env[@]}" "$out/ooo_wait" -p -c "${config#ooo-cb}" "$threads" "$iterations") ;;
    inert) cmd=(env "${runtime_env[@]}" OPENCL_LAYERS="$bin/libofftrace_opencl.so" "${prog[@]}") ;;
    *) echo "stress-hang: unknown configuration $config" >&2; exit 2 ;;
  esac
  local start=$SECONDS
  setsid nice -n 19 "${cmd[@]}" >"$out/run-$tag.log" 2>&1 &
  local pid=$! status
  while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - start)) -lt "$limit" ]; do sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then
    # The program's threads first (the python process of the group), then the group is ended.
    local bt=$out/hang-$tag-$round.bt p
    for p in $(pgrep -g "$pid"); do
      if [ "$(cat /proc/"$p"/comm 2>/dev/null)" != offtrace ]; then
        { echo "=== pid $p: $(tr '\0' ' ' </proc/"$p"/cmdline)"
          timeout 120 gdb -p "$p" -batch -ex 'set pagination off' -ex 'thread apply all bt' 2>&1; } >>"$bt"
      fi
    done
    kill -KILL -- -"$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    echo "$config $round $((SECONDS - start)) HANG ($bt)"
    return 1
  fi
  wait "$pid"
  status=$?
  rm -f "$trace"*
  echo "$config $round $((SECONDS - start)) $status"
  [ "$status" = 0 ] || cp "$out/run-$tag.log" "$out/fail-$tag-$round.log"
  return $((status == 0 ? 0 : 2))
}

declare -A hangs fails
IFS=, read -ra list <<<"$configs"
for c in "${list[@]}"; do hangs[$c]=0 fails[$c]=0; done
for ((r = 1; r <= runs; r++)); do
  for c in "${list[@]}"; do
    run_one "$c" "$r"
    case $? in 1) hangs[$c]=$((hangs[$c] + 1)) ;; 2) fails[$c]=$((fails[$c] + 1)) ;; esac
  done
done
for c in "${list[@]}"; do
  echo "$c: ${hangs[$c]} hangs, ${fails[$c]} failures in $runs runs ($threads threads, $iterations iterations)"
done
exit
}
