#!/bin/bash
# cpu.sw counters recorded by offtrace vs `perf stat` on the same run of the bundled SYCL
# example. The program offtrace records is `perf stat -- python ...`, so perf stat counts python
# (from its exec) and offtrace's counters count perf + python (from perf's exec); perf's own
# share is measured alone the same way (`perf stat -- true`) and subtracted.
# Prints: perf stat; offtrace whole run (the same counters the agent sampled, read at exit);
# the trace's last sample (taken when the agent finished, before the runtime's teardown).
# Usage: scripts/metrics/perf_stat_compare.sh [iterations]   (needs perf, a release build, .venv)
set -eu
it=${1:-8}; tmp=$(mktemp -d); bin=target/release/offtrace
ev=task-clock,context-switches,cpu-migrations,page-faults,major-faults
$bin record --intel-opencl --runtime .venv --metrics cpu.sw -o $tmp/t.offtrace -- \
    perf stat -x, -o $tmp/perf.csv -e $ev -- .venv/bin/python examples/sycl/usm_pipeline.py $it 2>$tmp/rec.err >/dev/null
$bin record --intel-opencl --runtime .venv --metrics cpu.sw -o $tmp/self.offtrace -- \
    perf stat -x, -o $tmp/self.csv -e $ev -- true 2>$tmp/self.err >/dev/null || true
target/release/examples/otdump $tmp/t.offtrace > $tmp/dump.txt
python3 - "$tmp" <<'PY'
import re, sys
d = sys.argv[1]
names = ["task_clock", "context_switches", "cpu_migrations", "page_faults", "major_faults"]
perf = {}
for l in open(f"{d}/perf.csv"):
    f = l.strip().split(",")
    if len(f) > 3 and f[2]:
        perf[f[2].replace("-", "_").replace("task_clock", "task_clock")] = float(f[0]) * (1e6 if f[1] == "msec" else 1)
def whole(path):
    for l in open(path):
        if "whole run" in l:
            return {k: float(v) for k, v in re.findall(r"(\w+)=(\d+)", l)}
    return {}
w, own = whole(f"{d}/rec.err"), whole(f"{d}/self.err")
last = {}
base = 0x4d45000000000000
for l in open(f"{d}/dump.txt"):
    m = re.search(r"CounterSample \{ counter: (\d+), .*value: (\d+)", l)
    if m and base <= int(m.group(1)) < base + 16:
        last[int(m.group(1)) - base] = float(m.group(2))
idx = {"task_clock": 0, "context_switches": 2, "cpu_migrations": 3, "page_faults": 4, "major_faults": 5}
print(f"{'counter':17} {'perf stat':>12} {'offtrace run':>13} {'perf own':>9} {'run - own':>12} {'diff':>7} {'trace last':>12}")
for n in names:
    p = perf.get(n, float("nan")); o = w.get(n, float("nan")); s = own.get(n, 0.0); t = last.get(idx[n], float("nan"))
    diff = 100 * ((o - s) - p) / p if p else float("nan")
    print(f"{n:17} {p:12.0f} {o:13.0f} {s:9.0f} {o - s:12.0f} {diff:+6.2f}% {t:12.0f}")
PY
rm -rf "$tmp"
