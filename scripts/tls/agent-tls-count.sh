#!/usr/bin/env bash
# __tls_get_addr calls and instructions per agent notification, with the agent loaded as
# applications load it (a shared object the dispatcher dlopens from XPTI_SUBSCRIBERS):
# agent-notify.c's loops under callgrind, the calling thread's measured_batch only, at N and 2N,
# difference / N (docs/overhead.md, "## Agent").
#
#   cargo build --release -p offtrace-agent    # target/release/libofftrace_agent.so
#   scripts/tls/agent-tls-count.sh [AGENT_SO=target/release/libofftrace_agent.so] [N=2000]
#
# ur_pair: per pair (2 notifications); graph: per command (4 notifications).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
agent=$(realpath "${1:-$here/target/release/libofftrace_agent.so}")
n=${2:-2000}
venv=${OFFTRACE_SYCL_VENV:-$here/.venv}
disp=$venv/lib/libxptifw.so.1
work=$(mktemp -d /tmp/agent-tls-count.XXXXXX)
trap 'rm -rf "$work"' EXIT
gcc -O2 -o "$work/agent-notify" "$here/scripts/tls/agent-notify.c" -ldl
for op in ur_pair graph; do
  for k in "$n" $((2 * n)); do
    env XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER="$disp" XPTI_SUBSCRIBERS="$agent" \
      OFFTRACE_OUTPUT=/dev/null OFFTRACE_BUFFER_RECORDS=65536 \
      valgrind --tool=callgrind --separate-threads=yes --toggle-collect='measured_batch' \
      --callgrind-out-file="$work/$op.$k" "$work/agent-notify" "$disp" "$op" "$k" > "$work/$op.$k.log" 2>&1
    best=0 bestc=0
    for f in "$work/$op.$k"*; do
      [ -f "$f" ] && [[ $f != *.log ]] || continue
      read -r ir c < <("$here/scripts/callgrind-calls.py" "$f" | awk '{print $NF}' | paste -sd' ')
      if [ "$ir" -gt "$best" ]; then best=$ir bestc=$c; fi
    done
    echo "$op $k $best $bestc" >> "$work/res"
  done
done
python3 - "$work/res" "$n" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
n = int(sys.argv[2])
for op, per in (("ur_pair", 2), ("graph", 4)):
    r = {int(k): (int(i), int(c)) for o, k, i, c in rows if o == op}
    di, dc = r[2 * n][0] - r[n][0], r[2 * n][1] - r[n][1]
    print(f"{op}: per {'pair' if per == 2 else 'command'} {di / n:.1f} instructions, {dc / n:.2f} __tls_get_addr;"
          f" per notification {di / n / per:.1f} instructions, {dc / n / per:.2f} __tls_get_addr")
PY
