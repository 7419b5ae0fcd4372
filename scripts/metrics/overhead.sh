#!/bin/bash
# End-to-end cost of `record --metrics` on the bundled SYCL example: the program's wall time and
# CPU time (perf stat's task-clock of the program: the sampling threads run inside it) without
# metrics, with cpu.sw,proc.process at 10 ms and at 1 ms; runs interleaved, medians reported.
# Also the sampling thread's CPU time per sample (OFFTRACE_METRICS_STATS).
# Usage: scripts/metrics/overhead.sh [runs] [iterations]   (needs perf, a release build, .venv)
set -eu
runs=${1:-5}; it=${2:-200}
bin=target/release/offtrace; tmp=$(mktemp -d)
py=.venv/bin/python; ex=examples/sycl/usm_pipeline.py
one() { # label, extra args...
    local label=$1; shift
    OFFTRACE_METRICS_STATS=$tmp/$label.stats $bin record --intel-opencl --runtime .venv "$@" -o $tmp/$label.offtrace -- \
        perf stat -x, -o $tmp/$label.perf -e task-clock -- $py $ex $it >/dev/null 2>&1
    local tc wall
    tc=$(grep task-clock $tmp/$label.perf | cut -d, -f1)
    wall=$(grep -i 'seconds time elapsed' $tmp/$label.perf | awk '{print $1}' || true)
    echo "$label $tc" >> $tmp/results
    [ -f $tmp/$label.stats ] && cat $tmp/$label.stats | sed "s/^/$label /" >> $tmp/stats || true
}
for r in $(seq $runs); do
    one none
    one m10 --metrics cpu.sw,proc.process --sample-period 10ms
    one m1 --metrics cpu.sw,proc.process --sample-period 1ms
done
python3 - "$tmp" <<'PY'
import sys, json, statistics as st
d = sys.argv[1]
res = {}
for l in open(f"{d}/results"):
    k, v = l.split(); res.setdefault(k, []).append(float(v))
base = st.median(res["none"])
for k in ("none", "m10", "m1"):
    m = st.median(res[k])
    print(f"{k:5} task-clock median {m:9.1f} ms over {len(res[k])} runs {sorted(res[k])}  overhead {100*(m-base)/base:+.2f} %")
cost = {}
for l in open(f"{d}/stats"):
    k, j = l.split(" ", 1); j = json.loads(j)
    c = cost.setdefault((k, j["group"]), [0, 0]); c[0] += j["reports"]; c[1] += j["sampling_cpu_ns"]
for (k, g), (n, ns) in sorted(cost.items()):
    print(f"{k:5} {g:13} {n:6} samples, sampling thread CPU {ns/max(n,1)/1000:7.1f} us/sample")
PY
rm -rf "$tmp"
