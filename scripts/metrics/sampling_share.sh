#!/bin/bash
# The sampling threads' share of the program's CPU time, measured in the same run: the agent's
# OFFTRACE_METRICS_STATS (each streamer thread's CPU time, CLOCK_THREAD_CPUTIME_ID around
# collect + calculate + emit) over perf stat's task-clock of the program (which includes those
# threads). Robust on a loaded machine, unlike A/B run times.
# Usage: scripts/metrics/sampling_share.sh [runs] [iterations] [groups]
set -eu
runs=${1:-3}; it=${2:-3000}; groups=${3:-cpu.sw,proc.process}; tmp=$(mktemp -d)
for period in 10ms 1ms; do
  for r in $(seq $runs); do
    OFFTRACE_METRICS_STATS=$tmp/s target/release/offtrace record --intel-opencl --runtime .venv --metrics $groups --sample-period $period \
      -o $tmp/t.offtrace -- perf stat -x, -o $tmp/p -e task-clock -- .venv/bin/python examples/sycl/usm_pipeline.py $it >/dev/null 2>&1
    python3 - "$tmp" "$period" <<'PY'
import json, sys
d, period = sys.argv[1:3]
tc = float(next(l for l in open(f"{d}/p") if "task-clock" in l).split(",")[0]) * 1e6
st = [json.loads(l) for l in open(f"{d}/s")]
cpu = sum(s["sampling_cpu_ns"] for s in st); n = sum(s["reports"] for s in st)
per = ", ".join(f"{s['group']} {s['reports']} x {s['sampling_cpu_ns']/max(s['reports'],1)/1e3:.1f} us" for s in st)
print(f"period {period:5} program CPU {tc/1e6:8.1f} ms  sampling CPU {cpu/1e6:6.1f} ms = {100*cpu/tc:5.2f} %  ({per})")
PY
  done
done
rm -rf "$tmp"
