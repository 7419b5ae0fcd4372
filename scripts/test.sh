#!/usr/bin/env bash
# The test command. Prints the wall time of each part.
#
#   setup   (network) what the tiers need and the machine lacks: system packages through
#           scripts/setup-system.sh (apt-get), rustfmt and clippy (rustup), cargo-nextest, and the
#           crates (cargo fetch).
#   tier 1  no network, no runtime: scripts/test-tier1.sh (formatting, clippy with -D warnings,
#           every test that needs no runtime, doc tests, loom models, miri where installed, a short
#           run of each fuzz target). Cargo runs offline.
#   tier 2  the real runtimes: Intel's SYCL runtime from PyPI into the venv (scripts/setup-sycl.sh),
#           PoCL and pyopencl (scripts/setup-opencl.sh; both skipped when present), the reference
#           subscriber (tools/xpti-dump), the workspace build and benchmarks, then every test that
#           needs a runtime (nextest profile `tier2`, .config/nextest.toml). The CUDA tests need an
#           NVIDIA GPU and run separately (scripts/gpu-tests.sh).
#
# usage: scripts/test.sh [--tier 1|2] [extra nextest args for tier 2]
#
# Environment: OFFTRACE_SYCL_VENV (default <repo>/.venv): the SYCL venv to use, created when
# missing; point it at an existing one to reuse it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
export OFFTRACE_SYCL_VENV=${OFFTRACE_SYCL_VENV:-$here/.venv}
tiers="1 2"
if [ "${1:-}" = --tier ]; then tiers=$2; shift 2; fi
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

setup() {
  scripts/setup-system.sh
  command -v cargo >/dev/null || { echo "test.sh: no cargo: install Rust with rustup (README.md)" >&2; exit 1; }
  if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
    rustup component add rustfmt clippy
  fi
  if ! cargo nextest --version >/dev/null 2>&1; then
    echo "test.sh: installing cargo-nextest (prebuilt, from get.nexte.st)"
    curl -LsSf https://get.nexte.st/latest/linux | tar zxf - -C "${CARGO_HOME:-$HOME/.cargo}/bin" ||
      cargo install cargo-nextest --locked
  fi
  cargo fetch --locked
  cargo fetch --locked --manifest-path fuzz/Cargo.toml
}

tier1() {
  CARGO_NET_OFFLINE=true scripts/test-tier1.sh
}

tier2() {
  echo "== tier 2: SYCL runtime ($OFFTRACE_SYCL_VENV)"
  scripts/setup-sycl.sh --venv "$OFFTRACE_SYCL_VENV"
  echo "== tier 2: OpenCL runtimes (PoCL, the ICD loader, pyopencl)"
  scripts/setup-opencl.sh
  echo "== tier 2: the reference subscriber (tools/xpti-dump)"
  OFFTRACE_XPTI_DUMP=$(scripts/build-xpti-dump.sh "$OFFTRACE_SYCL_VENV")
  export OFFTRACE_XPTI_DUMP
  echo "== tier 2: build"
  cargo build --locked --workspace --all-targets
  cargo bench --locked --workspace --no-run
  echo "== tier 2: the tests that need a runtime"
  # A missing runtime must fail here, not be skipped.
  unset OFFTRACE_SKIP_SYCL
  cargo nextest run --locked --workspace --profile tier2 --no-fail-fast "$@"
}

report=()
timed() { # timed NAME COMMAND...
  local t0=$SECONDS
  "${@:2}"
  local s=$((SECONDS - t0))
  report+=("$(printf '%-7s %dm%02ds' "$1" $((s / 60)) $((s % 60)))")
  echo "== $1 passed in $((s / 60))m$(printf '%02d' $((s % 60)))s"
}

echo "== setup"
timed setup setup
for t in $tiers; do
  timed "tier $t" "tier$t" "$@"
done
echo "== all passed"
printf '   %s\n' "${report[@]}"
