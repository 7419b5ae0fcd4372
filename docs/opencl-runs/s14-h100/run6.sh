#!/bin/bash
# H100 host: OpenCL through CUDA's layer-less loader (preload mode, chosen by record) on NVIDIA's
# OpenCL (H100) and PoCL 5; Ubuntu's ocl-icd (layer mode) on PoCL 5; device times against the
# program's own; many small kernels on the GPU: untraced, the floor, record.
cd "$(dirname "$0")"; P=$PWD; B=$P/bin; O=$B/offtrace; R=$OUT/r; mkdir -p $R
for p in vector_add codeplay_counters regions ooo_threads many_kernels process_life; do
  cc -O2 $p.c -lOpenCL -lpthread -o $B/$p 2>&1 | grep -i error
  cc -O2 $p.c -Wl,-rpath,/usr/lib/x86_64-linux-gnu -lOpenCL -lpthread -o $B/$p.icd 2>&1 | grep -i error
done
ldd $B/vector_add | grep OpenCL; ldd $B/vector_add.icd | grep OpenCL
echo "== check NVIDIA"; bash scripts/opencl-preload-check.sh $B NVIDIA; echo rc=$?
echo "== check Portable"; bash scripts/opencl-preload-check.sh $B Portable; echo rc=$?
$O record -o /tmp/va.offtrace -- $B/vector_add --platform NVIDIA --profile --iters 5 > $R/va.out 2> $R/va.err; echo "va rc $?"; cat $R/va.err; cat $R/va.out | head -20
$O report /tmp/va.offtrace > $R/va.report.txt 2>&1; sed -n 1,70p $R/va.report.txt
for plat in NVIDIA Portable; do
  echo "== ooo_threads device times vs the program's own, $plat (preload)"
  $O record -o /tmp/ooo-$plat.offtrace -- $B/ooo_threads --profile --platform $plat --rounds 3 > $R/ooo-$plat.out 2> $R/ooo-$plat.err; echo "rc $?"; cat $R/ooo-$plat.err
  $O export --format sqlite -o /tmp/ooo-$plat.sqlite /tmp/ooo-$plat.offtrace 2>&1 | tail -1
  python3 scripts/check_cl_profile.py $R/ooo-$plat.out /tmp/ooo-$plat.sqlite 2>&1 | tail -12
done
echo "== ooo_threads, Portable, Ubuntu's ocl-icd (layer mode)"
$O record -o /tmp/ooo-icd.offtrace -- $B/ooo_threads.icd --profile --platform Portable --rounds 3 > $R/ooo-icd.out 2> $R/ooo-icd.err; echo "rc $?"; cat $R/ooo-icd.err
$O export --format sqlite -o /tmp/ooo-icd.sqlite /tmp/ooo-icd.offtrace 2>&1 | tail -1
python3 scripts/check_cl_profile.py $R/ooo-icd.out /tmp/ooo-icd.sqlite 2>&1 | tail -6
$O record -o /tmp/cp.offtrace -- $B/codeplay_counters --platform NVIDIA > $R/cp.out 2>&1; echo "codeplay NVIDIA rc $?"; head -50 $R/cp.out
echo "== many_kernels on NVIDIA (H100), 20000 kernels: ns/kernel (program) + cpu; record = offtrace record (preload)"
for items in 64 16384; do for r in 1 2 3 4 5 6 7; do for c in plain query record; do
  case $c in plain) e=(); a=();; query) e=(); a=(--query);; record) e=($O record -o /tmp/r.offtrace --); a=();; esac
  s=$( { /usr/bin/time -f "cpu %U %S wall %e" "${e[@]}" $B/many_kernels --platform NVIDIA --kernels 20000 --calls 0 --items $items "${a[@]}" ; } 2>&1 | grep -v "^offtrace" | tr '\n' ' ')
  echo "items$items $c $r $s"; rm -f /tmp/r.offtrace*
done; done; done
$O record -o /tmp/mk.offtrace -- $B/many_kernels --platform NVIDIA --kernels 20000 --calls 0 2>&1 | tail -2; $O report /tmp/mk.offtrace | sed -n 1,30p
for r in 1 2 3; do for c in plain record; do
  case $c in plain) e=();; record) e=($O record -o /tmp/r.offtrace --);; esac
  echo "calls $c $r $("${e[@]}" $B/many_kernels --platform NVIDIA --kernels 10 --calls 2000000 2>/dev/null | grep calls)"; rm -f /tmp/r.offtrace*
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
