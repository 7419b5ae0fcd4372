#!/bin/bash
# The agent's wall-clock cost per UR begin+end pair, the `wall` test of tests/cost.rs (batches of
# COST_N pairs on the agent's stream and on an empty one, alternately, COST_ROUNDS rounds,
# medians; the writer on another CPU, no writer wake-up inside a timed batch), main's test binary
# and this branch's alternately, REPS runs each, Intel's dispatcher from the venv.
# usage: vm-wall.sh MAIN_COST_BIN BRANCH_COST_BIN [REPS]
# (build each with `cargo test --release -p offtrace-agent --test cost --no-run` in its checkout)
export OFFTRACE_SYCL_VENV=${OFFTRACE_SYCL_VENV:-$PWD/.venv}
for r in $(seq "${3:-3}"); do
  for b in "$1" "$2"; do
    echo "$(basename "$b") $(COST_ROUNDS=${COST_ROUNDS:-21} COST_N=${COST_N:-4096} "$b" --ignored --exact wall --nocapture 2>&1 | grep '^wall')"
  done
done
