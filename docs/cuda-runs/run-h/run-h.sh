#!/usr/bin/env bash
# Run H (s2-cudagraph): run G's script after graph nodes are linked to the commands they ran
# (TASK_GRAPH task records per graph kernel/copy/memset) and typed by the driver: the CUDA C
# workload and a short train.py under `offtrace record`, their reports, the trace-vs-dump checks,
# and the dump's graph node types.
set -u
O=${OUT:?}/run-h; mkdir -p "$O"; W=$(mktemp -d)
PY=/opt/torch/.venv/bin/python
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OFFTRACE_CUDA_ACTIVITY=kernel,memcpy,memset,sync,marker
BIN=target/release/offtrace
nvcc -O2 -arch=sm_90 -cudart shared -lineinfo -o "$W/workload" examples/cuda/workload.cu || echo "FAILED nvcc"
OFFTRACE_CUDA_DUMP="$W/workload-dump.jsonl" timeout 60 $BIN record -o "$W/workload.offtrace" -- "$W/workload" > /dev/null 2> "$O/workload-record.err" || echo "FAILED record workload"
grep '"t":"graph' "$W/workload-dump.jsonl" > "$O/workload-dump-graph.jsonl"
timeout 60 $BIN report "$W/workload.offtrace" > "$O/workload-report.txt" 2>&1
target/release/trace_jsonl "$W/workload.offtrace" > "$W/w.trace.jsonl" && $PY scripts/cuda/check.py trace "$W/w.trace.jsonl" "$W/workload-dump.jsonl" workload > "$O/workload-checks.txt" 2>&1 || echo "FAILED workload checks"
OFFTRACE_CUDA_DUMP="$W/train-dump.jsonl" timeout 150 $BIN record -o "$W/train.offtrace" -- $PY examples/cuda/train.py --steps 5 --warmup 2 > /dev/null 2> "$O/train-record.err" || echo "FAILED record train"
timeout 60 $BIN report "$W/train.offtrace" > "$O/train-report.txt" 2>&1
TRACE_JSONL_CALLS=1 target/release/trace_jsonl "$W/train.offtrace" > "$W/t.trace.jsonl" && $PY scripts/cuda/check.py trace "$W/t.trace.jsonl" "$W/train-dump.jsonl" train > "$O/train-checks.txt" 2>&1 || echo "FAILED train checks"
grep '"t":"graph_node"' "$W/train-dump.jsonl" | grep -o '"node_type":[0-9]*' | sort | uniq -c > "$O/train-node-types.txt"
grep -h "Task graph" "$O/workload-report.txt" "$O/train-report.txt"; cat "$O/workload-dump-graph.jsonl" | head -8; cat "$O/train-node-types.txt"
tail -n 3 "$O/workload-checks.txt" "$O/train-checks.txt"
