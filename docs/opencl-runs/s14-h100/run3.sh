#!/bin/bash
cd "$(dirname "$0")"; P=$PWD; B=$P/bin; O=$B/offtrace
for p in vector_add ooo_threads many_kernels; do cc -O2 $p.c -lOpenCL -lpthread -o $B/$p; done
for plat in NVIDIA Portable; do for i in 1 2; do
$O record -o $OUT/ooo-$plat-$i.offtrace -- $B/ooo_threads --profile --platform $plat --rounds 3 > $OUT/ooo-$plat-$i.out 2>/dev/null
$O export --format sqlite -o $OUT/ooo-$plat-$i.sqlite $OUT/ooo-$plat-$i.offtrace 2>&1 | tail -1
python3 scripts/check_cl_profile.py $OUT/ooo-$plat-$i.out $OUT/ooo-$plat-$i.sqlite 2>&1 | grep -v -- "->" | tail -6
done; done
$O record -o $OUT/mk.offtrace -- $B/many_kernels --platform NVIDIA --kernels 20000 --calls 0 --query 2>&1 | tail -3
$O export --format sqlite -o $OUT/mk.sqlite $OUT/mk.offtrace 2>&1 | tail -1
python3 - $OUT/mk.sqlite <<'EOF'
import sqlite3,sys
db=sqlite3.connect(sys.argv[1])
print("many_kernels NVIDIA: rows, timed, start<enqueue, max early us, offset samples:", db.execute("select count(*), count(device_start_ns), sum(device_start_ns < enqueue_ns), max(enqueue_ns-device_start_ns)/1000.0 from device_activity").fetchone(), db.execute("select count(*) from counter_samples s join counters c using(counter) where c.name='opencl.clock_offset_ns'").fetchone())
EOF
rm -f $OUT/mk.*
