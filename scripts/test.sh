#!/usr/bin/env bash
# The test command: sets up what the tests need (the SYCL runtime from PyPI, the shared
# full-dump subscriber, the workspace build), then runs every test of the workspace against the
# real runtime, the loom model checks, and compiles the benchmarks.
#
# usage: scripts/test.sh [extra nextest/test args]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
export OFFTRACE_SYCL_VENV=${OFFTRACE_SYCL_VENV:-$here/.venv}

echo "== setup: SYCL runtime"
scripts/setup-sycl.sh --venv "$OFFTRACE_SYCL_VENV"
echo "== setup: xpti-dump (the reference subscriber)"
OFFTRACE_XPTI_DUMP=$(scripts/build-xpti-dump.sh "$OFFTRACE_SYCL_VENV")
export OFFTRACE_XPTI_DUMP

echo "== build"
cargo build --locked --workspace --all-targets

echo "== tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --locked --workspace --no-fail-fast "$@"
else
  cargo test --locked --workspace --no-fail-fast "$@"
fi
cargo test --locked --workspace --doc

echo "== loom model checks"
if grep -rqs 'cfg(loom)' crates/offtrace-core/src; then
  CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" cargo test --locked --release -p offtrace-core --lib -- loom
fi

echo "== benches compile"
cargo bench --locked --workspace --no-run
