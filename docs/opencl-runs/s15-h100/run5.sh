#!/bin/bash
# gpu-tests step 4 with the before (b52882d) and after bundles: is the cuda_tool failure a regression?
cd "$(dirname "$0")"; F=$PWD; cd ../..; mkdir -p target/release; cp $F/trace_jsonl target/release/trace_jsonl
for v in before after; do
  echo "=== $v"
  OFFTRACE_CUDA_LIB=$F/$v/libofftrace_cuda.so OFFTRACE_BIN=$F/$v/offtrace PYTHON=/opt/torch/.venv/bin/python OUT=$OUT/gpu-$v ONLY="4" timeout 300 bash scripts/gpu-tests.sh > $OUT/gpu-$v.log 2>&1; echo "gpu-tests $v rc $?"
  grep -E "^(ok|FAIL)|failed step|cuda_tool:" $OUT/gpu-$v.log | head -40
done
