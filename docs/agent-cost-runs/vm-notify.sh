#!/bin/bash
# The agent's wall-clock cost per UR begin+end pair (criterion bench `notify`, group `ur_call`),
# main's bench binary and this branch's, interleaved, N rounds, Intel's dispatcher from the venv.
# usage: vm-notify.sh MAIN_NOTIFY_BIN BRANCH_NOTIFY_BIN [ROUNDS]
# (build each with `cargo bench --no-run -p offtrace-agent --bench notify` in its checkout)
base=$1; new=$2; rounds=${3:-3}
for r in $(seq "$rounds"); do
  for cfg in "$base:1" "$base:0" "$new:"; do
    bin=${cfg%:*}; raw=${cfg##*:}
    res=$(env ${raw:+OFFTRACE_RAW=$raw} "$bin" --bench 'ur_call/' --warm-up-time 1 --measurement-time 2 --noplot 2>&1 \
      | awk '/time:/ {print $1, $5}' | tr '\n' ' ')
    echo "round $r $(basename "$bin") OFFTRACE_RAW=${raw:-default}: $res load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
