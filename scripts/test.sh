#!/usr/bin/env bash
# The test command, in two tiers; prints the wall time of each.
#
#   tier 1  needs no network and no runtime: scripts/test-tier1.sh (formatting, clippy with
#           -D warnings, unit tests, loom models, doc tests, a short run of each fuzz target).
#   tier 2  against the real runtimes: installs what is missing (system packages through
#           scripts/setup-system.sh, Intel's SYCL runtime from PyPI into the venv through
#           scripts/setup-sycl.sh), builds the workspace and the reference subscriber, and runs
#           every integration test (each crate's tests/).
#
# usage: scripts/test.sh [--tier 1|2] [extra nextest/test args for tier 2]
#
# Environment: OFFTRACE_SYCL_VENV (default <repo>/.venv): the SYCL venv to use or create; point it
# at an existing one to reuse it. The crates are fetched (network) before tier 1, so tier 1 itself
# runs offline.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
export OFFTRACE_SYCL_VENV=${OFFTRACE_SYCL_VENV:-$here/.venv}
tiers="1 2"
if [ "${1:-}" = --tier ]; then tiers=$2; shift 2; fi

have_nextest() { cargo nextest --version >/dev/null 2>&1; }

tier1() {
  if [ -x scripts/test-tier1.sh ]; then
    scripts/test-tier1.sh
    return
  fi
  # Until scripts/test-tier1.sh exists: formatting, unit and doc tests, loom, offline.
  echo "== tier 1: formatting"
  cargo fmt --all --check
  echo "== tier 1: unit tests"
  if have_nextest; then
    cargo nextest run --offline --locked --workspace --lib --bins --no-fail-fast
  else
    cargo test --offline --locked --workspace --lib --bins --no-fail-fast
  fi
  echo "== tier 1: doc tests"
  cargo test --offline --locked --workspace --doc
  echo "== tier 1: loom models"
  CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" \
    cargo test --offline --locked --release -p offtrace-core --lib -- loom
}

tier2() {
  echo "== tier 2: system packages"
  scripts/setup-system.sh
  echo "== tier 2: SYCL runtime ($OFFTRACE_SYCL_VENV)"
  scripts/setup-sycl.sh --venv "$OFFTRACE_SYCL_VENV"
  echo "== tier 2: the reference subscriber (tools/xpti-dump)"
  OFFTRACE_XPTI_DUMP=$(scripts/build-xpti-dump.sh "$OFFTRACE_SYCL_VENV")
  export OFFTRACE_XPTI_DUMP
  echo "== tier 2: build"
  cargo build --locked --workspace --all-targets
  cargo bench --locked --workspace --no-run
  echo "== tier 2: integration tests against the real runtimes"
  # Only the tests/ of each crate: unit tests ran in tier 1. OFFTRACE_SKIP_SYCL must not hide a
  # missing runtime here.
  unset OFFTRACE_SKIP_SYCL
  if have_nextest; then
    cargo nextest run --locked --workspace --no-fail-fast -E 'kind(test)' "$@"
  else
    cargo test --locked --workspace --no-fail-fast --tests "$@"
  fi
}

if [[ " $tiers " == *" 1 "* ]]; then
  echo "== fetching crates"
  cargo fetch --locked
fi
declare -A took
for t in $tiers; do
  start=$(date +%s)
  "tier$t" "$@"
  took[$t]=$(($(date +%s) - start))
  printf '== tier %s passed in %dm%02ds\n' "$t" $((took[$t] / 60)) $((took[$t] % 60))
done
for t in $tiers; do printf 'tier %s: %dm%02ds\n' "$t" $((took[$t] / 60)) $((took[$t] % 60)); done
