#!/usr/bin/env bash
# Run T1: the GPU suite's functional steps with this branch's build, and where each launch of
# train.py comes from (runtime launch callback or driver-only API record). From the bundle root.
cd "$(dirname "$0")"
export PYTHON=/opt/torch/.venv/bin/python
O=$OUT/run-t1
mkdir -p "$O"
OUT=$O ONLY="1 2 3 4" timeout 300 scripts/gpu-tests.sh > "$O/gpu-tests.log" 2>&1
echo "rc=$?" >> "$O/gpu-tests.log"
# Launch sources per step of train.py --size base (record defaults), and main's for comparison.
W=$(mktemp -d)
for b in new main; do
  bin=target/release/offtrace; [ $b = main ] && bin=main/offtrace
  OFFTRACE_CUDA_STATS=1 OFFTRACE_CUDA_DUMP=$O/launch-$b.jsonl timeout 120 $bin record -o $W/t-$b.offtrace -- \
    $PYTHON examples/cuda/train.py --size base --steps 10 --warmup 3 --out $O/launch-$b.json > /dev/null 2> $O/launch-$b.err
  echo "$b rc=$?" >> "$O/gpu-tests.log"
done
TRACE_JSONL_CALLS=1 target/release/trace_jsonl $W/t-new.offtrace > $W/t-new.jsonl 2>/dev/null
$PYTHON scripts/cuda/launch_sources.py $O/launch-new.jsonl $W/t-new.jsonl > $O/launch-sources.txt 2>&1
gzip -f $O/launch-*.jsonl
tail -40 "$O/gpu-tests.log"; cat $O/launch-sources.txt | head -40
