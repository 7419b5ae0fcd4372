#!/usr/bin/env bash
# Fetches the CUDA/CUPTI headers the generator reads from PyPI (no CUDA install needed) and
# regenerates src/generated/. Versions: the ones PyTorch 2.11+cu130 installs (nvidia-cuda-cupti
# 13.0.85 = CUPTI_API_VERSION 130001), so the layouts match the CUPTI a PyTorch program loads.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work/whl" "$work/x"
plat=(--platform manylinux_2_25_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_28_x86_64)
for p in nvidia-cuda-cupti==13.0.85 nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88; do
  python3 -m pip download -q --no-deps --only-binary=:all: "${plat[@]}" --python-version 3.12 \
    --implementation cp -d "$work/whl" "$p"
done
for w in "$work"/whl/*.whl; do unzip -qo "$w" -d "$work/x"; done
python3 "$here/gen_tables.py" "$work/x/nvidia/cu13/include" "$here/../src/generated"
