#!/bin/bash
# gpu-tests 1-4 with the merged main + the --tool rule, the OpenCL layer next to offtrace.
cd "$(dirname "$0")"; F=$PWD; cd ../..; mkdir -p target/release; cp $F/trace_jsonl target/release/trace_jsonl
OFFTRACE_CUDA_LIB=$F/after/libofftrace_cuda.so OFFTRACE_BIN=$F/after/offtrace PYTHON=/opt/torch/.venv/bin/python OUT=$OUT/gpu ONLY="1 2 3 4" timeout 500 bash scripts/gpu-tests.sh > $OUT/gpu-tests.log 2>&1; echo "gpu-tests rc $?"
grep -E "^FAIL|failed step|cuda_tool: \{|not preloaded" $OUT/gpu-tests.log | cut -c1-300 | head -20
rm -rf $OUT/gpu
