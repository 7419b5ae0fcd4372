#!/usr/bin/env bash
# Run F (s2-cudareport): the CUDA C workload and a short train.py under `offtrace record` with
# NVTX markers and synchronisation recorded, their reports, and the trace-vs-dump checks.
set -u
O=${OUT:?}/run-f; mkdir -p "$O"; W=$(mktemp -d)
PY=/opt/torch/.venv/bin/python
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OFFTRACE_CUDA_ACTIVITY=kernel,memcpy,memset,sync,marker
BIN=target/release/offtrace
nvcc -O2 -arch=sm_90 -cudart shared -lineinfo -o "$W/workload" examples/cuda/workload.cu || echo "FAILED nvcc"
OFFTRACE_CUDA_DUMP="$O/workload-dump.jsonl" timeout 60 $BIN record -o "$W/workload.offtrace" -- "$W/workload" > /dev/null 2> "$O/workload-record.err" || echo "FAILED record workload"
timeout 60 $BIN report "$W/workload.offtrace" > "$O/workload-report.txt" 2>&1
target/release/trace_jsonl "$W/workload.offtrace" > "$W/w.trace.jsonl" && $PY scripts/cuda/check.py trace "$W/w.trace.jsonl" "$O/workload-dump.jsonl" workload > "$O/workload-checks.txt" 2>&1 || echo "FAILED workload checks"
OFFTRACE_CUDA_DUMP="$W/train-dump.jsonl" timeout 150 $BIN record -o "$W/train.offtrace" -- $PY examples/cuda/train.py --steps 5 --warmup 2 > /dev/null 2> "$O/train-record.err" || echo "FAILED record train"
timeout 60 $BIN report "$W/train.offtrace" > "$O/train-report.txt" 2>&1
TRACE_JSONL_CALLS=1 target/release/trace_jsonl "$W/train.offtrace" > "$W/t.trace.jsonl" && $PY scripts/cuda/check.py trace "$W/t.trace.jsonl" "$W/train-dump.jsonl" train > "$O/train-checks.txt" 2>&1 || echo "FAILED train checks"
grep -c . "$W/train-dump.jsonl"; grep '"t":"marker"' "$W/train-dump.jsonl" | head -6 > "$O/train-dump-markers.txt"
cp "$W/workload.offtrace" "$O/"
head -c 400 "$O/workload-report.txt"; tail -5 "$O/workload-checks.txt" "$O/train-checks.txt"
