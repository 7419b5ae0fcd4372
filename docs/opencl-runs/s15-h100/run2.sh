#!/bin/bash
# Before (main b52882d) / after (calibration floor, metrics probe) on the H100 host.
cd "$(dirname "$0")"; P=$PWD; R=$OUT/r; mkdir -p $R $P/bin
for p in ooo_threads many_kernels codeplay_counters; do cc -O2 $p.c -lOpenCL -lpthread -o $P/bin/$p 2>&1 | grep -i error; done
for v in before after; do
  echo "== metrics list, $v"; $P/$v/offtrace metrics list 2>&1 | grep -i -A3 "codeplay" | head -8
done
for v in before after; do for plat in NVIDIA Portable; do for i in 1 2 3; do
  $P/$v/offtrace record -o /tmp/ooo.offtrace -- $P/bin/ooo_threads --profile --platform $plat --rounds 3 > $R/ooo-$v-$plat-$i.out 2>$R/ooo-$v-$plat-$i.err
  $P/$v/offtrace export --format sqlite -o /tmp/ooo.sqlite /tmp/ooo.offtrace > /dev/null 2>&1
  echo "ooo $v $plat $i: $(python3 check_cl_profile.py $R/ooo-$v-$plat-$i.out /tmp/ooo.sqlite 2>&1 | grep -v -- '->' | tr '\n' ' ')"
  rm -f /tmp/ooo.offtrace* /tmp/ooo.sqlite
done; done; done
for v in before after; do
  $P/$v/offtrace record -o /tmp/mk.offtrace -- $P/bin/many_kernels --platform NVIDIA --kernels 20000 --calls 0 --query > /dev/null 2>&1
  $P/$v/offtrace export --format sqlite -o /tmp/mk.sqlite /tmp/mk.offtrace > /dev/null 2>&1
  python3 - /tmp/mk.sqlite $v <<'PY'
import sqlite3,sys
db=sqlite3.connect(sys.argv[1])
r=db.execute("""select count(*), count(device_start_ns), sum(device_start_ns < enqueue_ns), max(enqueue_ns-device_start_ns)/1000.0,
  sum(device_start_ns < (select min(c.start_ns) from api_calls c where c.correlation = a.correlation)),
  max((select min(c.start_ns) from api_calls c where c.correlation = a.correlation) - device_start_ns)/1000.0 from device_activity a""").fetchone()
print("many_kernels --query NVIDIA", sys.argv[2], "rows, timed, start<launch record, max us, start<call start, max us:", r)
PY
  rm -f /tmp/mk.*
done
$P/after/offtrace record -o /tmp/cp.offtrace -- $P/bin/codeplay_counters --platform NVIDIA > $R/cp.out 2>&1; echo "codeplay NVIDIA rc $?"; grep -i -E "fail|error|ok" $R/cp.out | head -5
echo "== wall per kernel (program's own), 20000 kernels, 64 items; cpu from time"
for plat in NVIDIA Portable; do for r in 1 2 3 4 5; do for c in plain query before after; do
  case $c in plain) e=(); a=();; query) e=(); a=(--query);; before|after) e=($P/$c/offtrace record -o /tmp/r.offtrace --); a=();; esac
  s=$( { /usr/bin/time -f "cpu %U %S wall %e" "${e[@]}" $P/bin/many_kernels --platform $plat --kernels 20000 --calls 0 --items 64 "${a[@]}" ; } 2>&1 | grep -v "^offtrace" | tr '\n' ' ')
  echo "$plat $c $r $s"; rm -f /tmp/r.offtrace*
done; done; done
cd $OUT && tar czf r.tgz r && rm -rf r
