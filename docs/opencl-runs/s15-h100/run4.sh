#!/bin/bash
# The merged main on the H100 host: OpenCL (metrics probe, calibration floor, Codeplay OS counters,
# cost before/after on both platforms) and the CUDA GPU tests 1-4. Everything to $OUT/log.txt too.
cd "$(dirname "$0")"; F=$PWD; R=$OUT/r; mkdir -p $R $F/bin
exec > >(tee $OUT/log.txt) 2>&1
for p in ooo_threads many_kernels codeplay_counters; do cc -O2 ../../examples/opencl/$p.c -lOpenCL -lpthread -o $F/bin/$p 2>&1 | grep -i error; done
for v in before after; do echo "== metrics list, $v"; $F/$v/offtrace metrics list 2>&1 | grep -E "^  codeplay|^Devices|^  [0-9]" | head -12; done
for v in before after; do
  $F/$v/offtrace record -o /tmp/cp.offtrace -- $F/bin/codeplay_counters --platform NVIDIA > $R/cp-$v.out 2>&1; echo "codeplay NVIDIA $v rc $?"; grep -E "^(write|kernel|read):|codeplay_counters:" $R/cp-$v.out
done
for plat in NVIDIA Portable; do for i in 1 2 3; do
  $F/after/offtrace record -o /tmp/ooo.offtrace -- $F/bin/ooo_threads --profile --platform $plat --rounds 3 > $R/ooo-$plat-$i.out 2>$R/ooo-$plat-$i.err
  $F/after/offtrace export --format sqlite -o /tmp/ooo.sqlite /tmp/ooo.offtrace > /dev/null 2>&1
  echo "ooo after $plat $i: $(python3 ../../scripts/review/check_cl_profile.py $R/ooo-$plat-$i.out /tmp/ooo.sqlite strict 2>&1 | grep -v -- '->' | tr '\n' ' ')"
  rm -f /tmp/ooo.offtrace* /tmp/ooo.sqlite
done; done
$F/after/offtrace record -o /tmp/mk.offtrace -- $F/bin/many_kernels --platform NVIDIA --kernels 20000 --calls 0 --query 2>&1 | tail -2
$F/after/offtrace report /tmp/mk.offtrace 2>&1 | sed -n 1,25p; rm -f /tmp/mk.offtrace*
echo "== wall per kernel (program's own), 20000 kernels; cpu and wall of the process from time"
for items in 64 16384; do for r in 1 2 3 4 5 6 7; do for plat in NVIDIA Portable; do for c in plain query before after; do
  case $c in plain) e=(); a=();; query) e=(); a=(--query);; before|after) e=($F/$c/offtrace record -o /tmp/r.offtrace --); a=();; esac
  s=$( { /usr/bin/time -f "cpu %U %S wall %e" "${e[@]}" $F/bin/many_kernels --platform $plat --kernels 20000 --calls 0 --items $items "${a[@]}" ; } 2>&1 | grep -v "^offtrace" | tr '\n' ' ')
  echo "items$items $plat $c $r $s"; rm -f /tmp/r.offtrace*
done; done; done; done
cd ../..
echo "== gpu-tests 1-4"
OFFTRACE_CUDA_LIB=$F/after/libofftrace_cuda.so OFFTRACE_BIN=$F/after/offtrace PYTHON=/opt/torch/.venv/bin/python OUT=$R/gpu ONLY="1 2 3 4" timeout 400 bash scripts/gpu-tests.sh > $R/gpu-tests.log 2>&1; echo "gpu-tests rc $?"; grep -E "^(ok|FAIL)|failed step" $R/gpu-tests.log | sort | uniq -c | sort -rn | head -30
cd $OUT && tar czf r.tgz r && rm -rf r
