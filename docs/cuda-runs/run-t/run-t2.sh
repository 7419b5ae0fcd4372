#!/usr/bin/env bash
# Run T: this branch's build. 1) the GPU suite's functional steps 1-4 (scripts/gpu-tests.sh
# ONLY="1 2 3 4") and where each launch of train.py comes from (launch_sources.py on the
# backend's dump and the trace); 2) run P's pinned overhead method with the modes untraced,
# untraced_b, record (this branch), record_main (main's build, main/), record_none, torch.
# Everything under $OUT/run-t; one archive of it plus the three logs come back.
cd "$(dirname "$0")"
export PYTHON=/opt/torch/.venv/bin/python
R=$OUT/run-t
F=$R/functional
mkdir -p "$F"
OUT=$F ONLY="1 2 3 4" timeout 200 scripts/gpu-tests.sh > "$F/gpu-tests.log" 2>&1
echo "rc=$?" >> "$F/gpu-tests.log"
W=$(mktemp -d)
for b in new; do
  bin=target/release/offtrace; [ $b = main ] && bin=main/offtrace
  OFFTRACE_CUDA_STATS=1 OFFTRACE_CUDA_DUMP=$F/launch-$b.jsonl timeout 120 $bin record -o $W/t-$b.offtrace -- \
    $PYTHON examples/cuda/train.py --size base --steps 10 --warmup 3 --out $F/launch-$b.json > /dev/null 2> $F/launch-$b.err
  echo "launch-$b rc=$?" >> "$F/gpu-tests.log"
done
TRACE_JSONL_CALLS=1 target/release/trace_jsonl $W/t-new.offtrace > $W/t-new.jsonl 2>/dev/null
$PYTHON scripts/cuda/launch_sources.py $F/launch-new.jsonl $W/t-new.jsonl > $F/launch-sources.txt 2>&1
grep '"t":"learning"' $F/launch-new.jsonl >> $F/launch-sources.txt
gzip -f $F/launch-*.jsonl
export OFFTRACE_BIN_MAIN=$PWD/main/offtrace
MODES="untraced untraced_b record record_main record_none torch" NAME=run-t PIN=lscpu \
  DEADLINE_S=${DEADLINE_S:-400} OUT=$OUT ./run-p.sh > /dev/null 2>&1
cp $F/gpu-tests.log $F/launch-sources.txt $R/run.log $OUT/ 2>/dev/null
tar -C $OUT -czf $OUT/run-t.tar.gz run-t && rm -rf $R
tail -25 $F/../gpu-tests.log 2>/dev/null; tail -22 $OUT/gpu-tests.log; cat $OUT/launch-sources.txt; tail -30 $OUT/run.log
