#!/bin/bash
# Wall-clock ns per notification of the agent (criterion bench `notify`, ur_call group), main's
# build and this branch's, interleaved, on two pinned quiet cores (taskset -c 2,3), with
# offtrace's own dispatcher standing in for the venv (lib/libxptifw.so.1).
cd "$(dirname "$0")"
export OFFTRACE_SYCL_VENV=$PWD/venv
out=${OUT:-/tmp/out}; mkdir -p "$out"
{ nproc; lscpu | grep -E "Model name|MHz"; uptime; } > "$out/host.txt" 2>&1
for round in 1 2 3; do
  for b in base new; do
    for raw in 0 1; do
      [ $b = new ] && [ $raw = 1 ] && continue
      echo "== round $round $b raw=$raw" >> "$out/notify.txt"
      OFFTRACE_RAW=$raw NOTIFY_BENCH_NO_PIN=1 taskset -c 2,3 ./notify-$b --bench 'ur_call/' --warm-up-time 1 --measurement-time 2 --noplot >> "$out/notify.txt" 2>&1
    done
  done
done
uptime >> "$out/host.txt"
# Layout it expects next to it: notify-base and notify-new (main's and this branch's
# `cargo bench --no-run -p offtrace-agent --bench notify` binaries, stripped) and
# venv/lib/libxptifw.so.1 (offtrace's target/release/libxptifw.so: the device has no SYCL venv).
