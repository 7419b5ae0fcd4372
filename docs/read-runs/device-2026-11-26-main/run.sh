#!/usr/bin/env bash
# s2-read: `offtrace report` on 100 M records, previous vs new, on 2 quiet cores (taskset -c 2,3).
# Traces are generated here in /tmp (not carried). Results: $OUT/results.tsv and the outputs' checksums.
set -u
cd "$(dirname "$0")"
O=${OUT:-/tmp/out}; mkdir -p "$O"
{ nproc; lscpu | grep -E "Model name|MHz|L2|L3"; uptime; } > "$O/machine.txt" 2>&1
T=/tmp/coord; mkdir -p $T
( time taskset -c 2,3 ./synth_typed $T/t100m.offtrace 100000000 ) > "$O/gen.txt" 2>&1
ls -la $T >> "$O/gen.txt"
run() { # label binary what rep
  local label=$1 bin=$2 what=$3 rep=$4 args=(report)
  [ "$what" = json ] && args=(report --format json)
  if [ -x /usr/bin/time ]; then
    taskset -c 2,3 /usr/bin/time -o $T/time -f "%e %U %S %M" ./$bin "${args[@]}" $T/t100m.offtrace > $T/$label-$what.out 2> $T/err
    read -r wall user sys rss < $T/time
  else
    local s=$(date +%s.%N)
    taskset -c 2,3 ./$bin "${args[@]}" $T/t100m.offtrace > $T/$label-$what.out 2> $T/err
    wall=$(python3 -c "print(round($(date +%s.%N)-$s,2))"); user=NA; sys=NA; rss=NA
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$what" "$rep" "$wall" "$user" "$sys" "$rss" | tee -a "$O/results.tsv"
}
printf 'label\twhat\trep\twall_s\tuser_s\tsys_s\tmaxrss_kb\n' > "$O/results.tsv"
for rep in 1 2 3 4 5; do
  run previous offtrace-previous report $rep
  run new offtrace-new report $rep
done
run previous offtrace-previous json 1; run new offtrace-new json 2; run previous offtrace-previous json 2
run new offtrace-new json 1
sha256sum $T/*.out > "$O/outputs.sha256"
cmp $T/previous-report.out $T/new-report.out && echo "report text identical" >> "$O/outputs.sha256"
cmp $T/previous-json.out $T/new-json.out && echo "report json identical" >> "$O/outputs.sha256"
head -5 $T/new-report.out > "$O/report-head.txt"
