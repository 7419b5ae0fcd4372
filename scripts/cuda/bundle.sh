#!/usr/bin/env bash
# Copies what scripts/gpu-tests.sh needs into DEST (a folder that travels to the GPU machine):
# the scripts, the workloads and the release-built, stripped libofftrace_cuda.so (and the
# offtrace binary when built). Run from the repository root after
# `cargo build --release -p offtrace-cuda [-p offtrace-cli]`.
set -euo pipefail
dest=${1:?usage: bundle.sh DEST}
rm -rf "$dest"
mkdir -p "$dest/scripts/cuda" "$dest/examples/cuda" "$dest/target/release" "$dest/crates/offtrace-capi"
cp -r crates/offtrace-capi/include "$dest/crates/offtrace-capi/"
# The Rust tests marked #[ignore = "needs CUDA"], built here (no Rust toolchain there).
t=$(ls -t target/release/deps/injection-* 2>/dev/null | grep -v '\.d$' | head -1 || true)
if [ -n "$t" ]; then strip -o "$dest/target/release/cuda-tests" "$t"; fi
if [ -x target/release/examples/trace_jsonl ]; then
  strip -o "$dest/target/release/trace_jsonl" target/release/examples/trace_jsonl
fi
cp scripts/gpu-tests.sh "$dest/scripts/"
cp scripts/cuda/*.py scripts/cuda/*.sh "$dest/scripts/cuda/"
cp examples/cuda/* "$dest/examples/cuda/"
strip -o "$dest/target/release/libofftrace_cuda.so" target/release/libofftrace_cuda.so
if [ -x target/release/offtrace ]; then
  strip -o "$dest/target/release/offtrace" target/release/offtrace
fi
du -sh "$dest"
