#!/usr/bin/env bash
# Run O: run I/K/L's pinned overhead method on the merged main (untraced, untraced_b, record, torch).
cd "$(dirname "$0")"
export PYTHON=/opt/torch/.venv/bin/python
O=$OUT/run-o; mkdir -p $O
PIN=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '!s[$2]++ && $2!=0 {print $1}' | head -4 | paste -sd,)
[ -n "$PIN" ] || PIN=4-7
{ date -u; lscpu; nproc; cat /proc/loadavg; echo "PIN_CPUS=$PIN"; } > $O/host.txt 2>&1
OUT=$O PIN_CPUS=$PIN THREADS=4 MODES="untraced untraced_b record torch" REPS=20 STEPS=60 WARMUP=20 \
  DEADLINE_S=420 timeout 520 scripts/cuda/overhead-ablation.sh > $O/run.log 2>&1
echo "rc=$?" >> $O/run.log
rm -f $O/*.pt.trace.json
tar -C $OUT -czf $OUT/run-o.tar.gz run-o
cp $O/run.log $O/stats-base.* $OUT/ 2>/dev/null
tail -25 $O/run.log
