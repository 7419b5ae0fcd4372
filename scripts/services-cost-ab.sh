#!/usr/bin/env bash
# The tool API's cost per operation, two builds of `crates/offtrace-core/tests/cost.rs` side by
# side: every round runs each operation with BEFORE then AFTER, ROUNDS rounds, and prints the
# median CPU time per operation of the emitting thread and of the process (the delivery thread
# included) for each build (docs/overhead.md, "Tool API").
#
#   cargo build --release -p offtrace-core --test cost    # then copy target/release/deps/cost-<hash>
#   scripts/services-cost-ab.sh BEFORE AFTER [ROUNDS=5] [MODE=quiet|plain|load] [OPS...]
#
# A side given as BIN@LIB runs BIN with COST_SO=LIB: the same loops inside that shared object
# (`cargo build --release -p offtrace-core --example cost_so`, target/release/examples/
# libcost_so.so), loaded with dlopen, as applications load offtrace (every thread-local access
# a `__tls_get_addr` call). E.g. `scripts/services-cost-ab.sh COST COST@LIB` is executable vs
# shared object.
#
# MODE quiet: each run at real-time priority (`chrt -f 10`), so that other processes on a
#   shared machine do not take the CPUs from it: the services' delivery thread runs beside the
#   emitting thread on the other core, as on an otherwise idle machine.
# MODE plain: as the machine is (note its load average, printed before and after).
# MODE load: one busy loop per CPU (started here, ended by their process ids when done), the
#   runs at normal priority: the delivery thread and the emitting thread share the CPUs with
#   them.
set -euo pipefail
before=$1
after=$2
rounds=${3:-5}
mode=${4:-quiet}
shift $(($# < 4 ? $# : 4))
ops=("$@")
[ ${#ops[@]} -eq 0 ] && ops=(callback buffer_record instant buffer_activity timestamp)
n=${COST_N:-2000000}

prefix=()
busy=()
case $mode in
quiet) prefix=(chrt -f 10) ;;
plain) ;;
load)
  for _ in $(seq "$(nproc)"); do
    bash -c 'while :; do :; done' &
    busy+=($!)
  done
  ;;
*) echo "MODE is quiet, plain or load" >&2; exit 2 ;;
esac
cleanup() { [ ${#busy[@]} -gt 0 ] && kill "${busy[@]}" 2>/dev/null; true; }
trap cleanup EXIT

echo "# mode=$mode rounds=$rounds N=$n $(uptime)"
out=$(mktemp)
for r in $(seq "$rounds"); do
  for op in "${ops[@]}"; do
    for side in before after; do
      bin=$before
      [ $side = after ] && bin=$after
      so=
      case $bin in *@*) so=${bin#*@}; bin=${bin%%@*} ;; esac
      line=$("${prefix[@]}" env ${so:+COST_SO="$so"} COST_CPU=1 COST_OP="$op" COST_N="$n" "$bin" --ignored --exact instructions --nocapture |
        grep -o 'cpu_ns_per_op.*')
      # cpu_ns_per_op OP thread=T process=P
      echo "$side $op $r $(echo "$line" | sed -E 's/.*thread=([0-9.]+) process=([0-9.]+)/\1 \2/')" | tee -a "$out"
    done
  done
done
echo "# $(uptime)"
python3 - "$out" "${ops[@]}" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"{'op':<16} {'before thread':>14} {'after thread':>13} {'before process':>15} {'after process':>14}")
for op in sys.argv[2:]:
    med = lambda side, i: statistics.median(float(r[3 + i]) for r in rows if r[0] == side and r[1] == op)
    print(f"{op:<16} {med('before', 0):>14.2f} {med('after', 0):>13.2f} {med('before', 1):>15.2f} {med('after', 1):>14.2f}")
EOF
rm -f "$out"
