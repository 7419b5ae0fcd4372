#!/usr/bin/env bash
# Copies what scripts/gpu-tests.sh needs into DEST (a folder that travels to the GPU machine):
# the scripts, the workloads and the release-built, stripped libofftrace_cuda.so (and the
# offtrace binary when built). Run from the repository root after
# `cargo build --release -p offtrace-cuda [-p offtrace-cli]`.
set -euo pipefail
dest=${1:?usage: bundle.sh DEST}
rm -rf "$dest"
mkdir -p "$dest/scripts/cuda" "$dest/examples/cuda" "$dest/target/release"
cp scripts/gpu-tests.sh "$dest/scripts/"
cp scripts/cuda/*.py "$dest/scripts/cuda/"
cp examples/cuda/* "$dest/examples/cuda/"
strip -o "$dest/target/release/libofftrace_cuda.so" target/release/libofftrace_cuda.so
if [ -x target/release/offtrace ]; then
  strip -o "$dest/target/release/offtrace" target/release/offtrace
  for f in libofftrace_agent.so libxptifw.so; do
    [ -f "target/release/$f" ] && strip -o "$dest/target/release/$f" "target/release/$f"
  done
fi
du -sh "$dest"
