#!/usr/bin/env bash
# The first test tier: needs no network (beyond crates already fetched) and no accelerator
# runtime. Formatting, clippy with -D warnings (also under --cfg loom and for the fuzz crate),
# the workspace's tests that need no runtime, doc tests, the loom models, miri on the pure-Rust
# lock-free parts (where a nightly toolchain with miri is installed), and a bounded run of every
# fuzz target. `scripts/test.sh` runs it before the second tier (the real runtimes).
#
# usage: scripts/test-tier1.sh            (every step)
#        scripts/test-tier1.sh loom miri  (only the named steps: fmt clippy test doc loom miri fuzz)
#
# Knobs: LOOM_MAX_PREEMPTIONS (default 3), OFFTRACE_FUZZ_ITERATIONS (mutated inputs per target on
# stable, default 50,000), OFFTRACE_FUZZ_SECONDS (libFuzzer seconds per target where cargo-fuzz
# is installed, default 20; 0 skips it), OFFTRACE_MIRI=0 skips miri.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(fmt clippy test doc loom miri fuzz)
want() { local s; for s in "${steps[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

timings=()
step() { # step NAME COMMAND...: runs and times one step; the first failure stops the tier.
  local name=$1; shift
  echo "== tier 1: $name"
  local t0=$SECONDS
  "$@"
  timings+=("$(printf '%-8s %4ds' "$name" $((SECONDS - t0)))")
}

# Hide the runtimes: a test that needs one and is not excluded in .config/nextest.toml fails here
# instead of passing only where the runtime happens to be installed.
export OFFTRACE_SYCL_VENV=/nonexistent/offtrace-tier1-has-no-sycl-venv
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
loom_target=target/loom
# The crates with loom models (tests named `loom_*` in `#[cfg(all(test, loom))]` modules).
loom_crates=(-p offtrace-core -p offtrace-xpti)

fmt() {
  cargo fmt --all --check
  cargo fmt --manifest-path fuzz/Cargo.toml --check
}

clippy() {
  cargo clippy --locked --workspace --all-targets -- -D warnings
  RUSTFLAGS="--cfg loom" cargo clippy --locked "${loom_crates[@]}" --all-targets --target-dir "$loom_target" -- -D warnings
  cargo clippy --locked --manifest-path fuzz/Cargo.toml --no-default-features --all-targets -- -D warnings
}

unit_tests() {
  if ! cargo nextest --version >/dev/null 2>&1; then
    echo "cargo-nextest is required (cargo install cargo-nextest --locked): the runtime tests are excluded by its tier1 profile" >&2
    return 1
  fi
  # The C API tests link the cdylibs (libofftrace.so) from target/debug: build every crate's
  # library and binary first (nextest builds only the test binaries).
  cargo build --locked --workspace
  cargo nextest run --locked --workspace --profile tier1 --no-fail-fast
}

doc_tests() {
  cargo test --locked --workspace --doc
}

loom() {
  # Release: loom explores thousands of interleavings per model. Three preemptions keep all the
  # models under a minute on 2 cores; a larger LOOM_MAX_PREEMPTIONS searches longer.
  LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-3} RUSTFLAGS="--cfg loom" \
    cargo test --locked --release "${loom_crates[@]}" --lib --target-dir "$loom_target" -- loom_
}

miri() {
  if [ "${OFFTRACE_MIRI:-1}" = 0 ]; then
    echo "miri skipped (OFFTRACE_MIRI=0)"
    return 0
  fi
  if ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "miri skipped: no nightly toolchain with the miri component (rustup toolchain install nightly --component miri rust-src)"
    return 0
  fi
  # The pure-Rust lock-free parts that run without the C++ shim or mmap'ed regions: the ring
  # (its unit tests but the proptest, which needs the file system), the buffers' doorbell (the
  # delivery thread's sleep and the producers' wake: miri reports a lost wakeup as a deadlock), the XPTI callback lists, and
  # the key map's resize races. Tables are leaked by design (ignore-leaks); the key map tags
  # entry addresses in integers (permissive provenance).
  MIRIFLAGS="${MIRIFLAGS:--Zmiri-strict-provenance}" cargo +nightly miri test --locked -p offtrace-core --lib \
    --target-dir target/miri -- ring:: doorbell:: --skip matches_bounded_fifo
  MIRIFLAGS="${MIRIFLAGS:--Zmiri-ignore-leaks -Zmiri-permissive-provenance}" cargo +nightly miri test --locked \
    -p offtrace-xpti --lib --target-dir target/miri -- callbacks::tests key_map::tests::results key_map::tests::the_tag
}

fuzz() {
  # Every fuzz target over its seed corpus and mutations of it, on stable (fuzz/tests/smoke.rs).
  cargo test --locked --release --manifest-path fuzz/Cargo.toml --no-default-features
  # Coverage-guided, where cargo-fuzz is installed (RUSTC_BOOTSTRAP: it needs nightly flags).
  local secs=${OFFTRACE_FUZZ_SECONDS:-20}
  if [ "$secs" -gt 0 ] && cargo fuzz --version >/dev/null 2>&1; then
    fuzz/seed.sh
    local t
    for t in $(cd fuzz && cargo fuzz list); do
      (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run "$t" "corpus/$t" -- -max_total_time="$secs")
    done
  else
    echo "libFuzzer run skipped (cargo-fuzz not installed, or OFFTRACE_FUZZ_SECONDS=0)"
  fi
}

want fmt && step fmt fmt
want clippy && step clippy clippy
want test && step test unit_tests
want doc && step doc doc_tests
want loom && step loom loom
want miri && step miri miri
want fuzz && step fuzz fuzz

echo "== tier 1 passed"
printf '   %s\n' "${timings[@]}"
