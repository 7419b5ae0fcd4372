#!/usr/bin/env bash
# The agent's CPU time per UR pair and per SYCL command, with the agent loaded as applications
# load it (Intel's dispatcher dlopens it from XPTI_SUBSCRIBERS): two builds of
# libofftrace_agent.so side by side, interleaved, ROUNDS rounds, medians of agent-notify.c's
# `cpu_ns_per_iter` (the calling thread's CPU time in its measured batches; the agent's writer
# thread drains between batches). docs/overhead.md, "## Agent".
#
#   scripts/tls/agent-time-ab.sh BEFORE_SO AFTER_SO [ROUNDS=7] [N=20000] [quiet|plain]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
before=$(realpath "$1")
after=$(realpath "$2")
rounds=${3:-7}
n=${4:-20000}
mode=${5:-quiet}
venv=${OFFTRACE_SYCL_VENV:-$here/.venv}
disp=$venv/lib/libxptifw.so.1
prefix=()
[ "$mode" = quiet ] && prefix=(chrt -f 10)
work=$(mktemp -d /tmp/agent-time-ab.XXXXXX)
trap 'rm -rf "$work"' EXIT
gcc -O2 -o "$work/agent-notify" "$here/scripts/tls/agent-notify.c" -ldl
echo "# mode=$mode rounds=$rounds N=$n $(uptime)"
for r in $(seq "$rounds"); do
  for op in ur_pair graph; do
    for side in before after; do
      so=$before
      [ $side = after ] && so=$after
      v=$(env AGENT_NOTIFY_TIME=1 XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER="$disp" XPTI_SUBSCRIBERS="$so" \
        OFFTRACE_OUTPUT=/dev/null OFFTRACE_BUFFER_RECORDS=65536 "${prefix[@]}" "$work/agent-notify" "$disp" "$op" "$n" |
        awk '/^cpu_ns_per_iter/ {print $3}')
      echo "$side $op $r $v" | tee -a "$work/res"
    done
  done
done
echo "# $(uptime)"
python3 - "$work/res" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"{'op':<10} {'before':>10} {'after':>10}   (ns per pair / command, medians)")
for op in ("ur_pair", "graph"):
    m = {s: statistics.median(float(v) for side, o, _, v in rows if side == s and o == op) for s in ("before", "after")}
    print(f"{op:<10} {m['before']:>10.2f} {m['after']:>10.2f}")
PY
