#!/bin/bash
# The sampling thread's share of the program's CPU time, two builds side by side, interleaved
# (what docs/metrics.md's before/after table comes from). Each build is a folder holding a
# release `offtrace` and `libofftrace_agent.so` (copy them out of target/release per build).
# Usage: scripts/metrics/sampling_ab.sh BEFORE_DIR AFTER_DIR [rounds] [iterations] [groups]
set -eu
before=$1; after=$2; rounds=${3:-5}; it=${4:-3000}; groups=${5:-cpu.sw,proc.process}
one() { # dir period
    local tmp; tmp=$(mktemp -d)
    # Intel's OpenCL CPU device through the environment (builds before --intel-opencl added it
    # themselves).
    OCL_ICD_FILENAMES=$PWD/.venv/lib/libintelocl.so OFFTRACE_METRICS_STATS=$tmp/s "$1/offtrace" record --runtime .venv --metrics "$groups" --sample-period "$2" \
        -o "$tmp/t.offtrace" -- perf stat -x, -o "$tmp/p" -e task-clock -- .venv/bin/python examples/sycl/usm_pipeline.py "$it" >/dev/null 2>&1
    python3 - "$tmp" "$2" "$1" <<'PY'
import json, sys
d, period, b = sys.argv[1:4]
tc = float(next(l for l in open(f"{d}/p") if "task-clock" in l).split(",")[0]) * 1e6
st = [json.loads(l) for l in open(f"{d}/s")]
cpu = sum(s["sampling_cpu_ns"] for s in st); n = max(s["reports"] for s in st)
per = ", ".join(f"{s['group']} {s['sampling_cpu_ns']/max(s['reports'],1)/1e3:.1f}" for s in st)
print(f"{b:22} period {period:5} program CPU {tc/1e6:8.1f} ms  sampling CPU {cpu/1e6:6.1f} ms = {100*cpu/tc:5.2f} %  rounds {n} per round {cpu/max(n,1)/1e3:6.1f} us ({per})")
PY
    rm -rf "$tmp"
}
for r in $(seq "$rounds"); do
    for p in 10ms 1ms; do
        one "$before" $p
        one "$after" $p
    done
done
