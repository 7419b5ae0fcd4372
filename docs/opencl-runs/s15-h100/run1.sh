#!/bin/bash
cd "$(dirname "$0")"; B=$PWD/bin; O=$B/offtrace; R=$OUT/r; mkdir -p $R
cc -O2 clockprobe.c -lOpenCL -lm -o $B/clockprobe 2>&1 | grep -i error
for p in ooo_threads many_kernels; do cc -O2 $p.c -lOpenCL -lpthread -o $B/$p 2>&1 | grep -i error; done
cat /sys/devices/system/clocksource/clocksource0/current_clocksource; (chronyc tracking 2>/dev/null || timedatectl 2>/dev/null) | head -12
for plat in NVIDIA Portable; do for m in in ooo; do
  $B/clockprobe $plat $m 1200 > $R/cp-$plat-$m.csv 2> $R/cp-$plat-$m.err; cat $R/cp-$plat-$m.err; python3 clockan.py $R/cp-$plat-$m.csv
done; done
# the same probe while 3 threads enqueue on out-of-order queues (ooo_threads) in the same process? separate: load
for i in 1 2; do
$O record -o /tmp/ooo.offtrace -- $B/ooo_threads --profile --platform NVIDIA --rounds 3 > $R/ooo-$i.out 2>$R/ooo-$i.err; echo "rc $?"
$O export --format sqlite -o /tmp/ooo.sqlite /tmp/ooo.offtrace 2>&1 | tail -1
python3 check_cl_profile.py $R/ooo-$i.out /tmp/ooo.sqlite 2>&1 | grep -v -- "->" | tail -5
python3 - /tmp/ooo.sqlite <<'PY'
import sqlite3,sys
db=sqlite3.connect(sys.argv[1])
print(db.execute("select count(*), count(device_start_ns), sum(device_start_ns < enqueue_ns), max(enqueue_ns-device_start_ns)/1000.0 from device_activity").fetchone())
for r in db.execute("select c.name, s.ts_ns, s.value from counter_samples s join counters c using(counter) where c.name like 'opencl.clock%' order by s.ts_ns"): print(r)
PY
done
cd $OUT && tar czf r.tgz r && rm -rf r
