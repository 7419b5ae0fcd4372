#!/usr/bin/env bash
# Instructions per launch on the launching thread of examples/launch_cost.rs (callgrind):
# the main thread's total of a run of 2N launches minus that of N (each run also makes N/10
# warm-up launches), divided by 1.1 N: start-up, recorder and table set-up cancel out.
#   docs/cuda-runs/launch-cost/callgrind.sh BINARY [N]   (BINARY: target/release/examples/launch_cost)
set -euo pipefail
bin=$1; n=${2:-20000}
dir=$(mktemp -d /tmp/launch-cost-cg.XXXX)
count() {
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$dir/cg.$1" "$bin" "$1" >/dev/null 2>&1
    # Thread 1 is the launching (main) thread; its file ends in -01.
    awk '/^summary:|^totals:/ {print $2; exit}' "$dir/cg.$1-01"
}
a=$(count "$n"); b=$(count $((2 * n)))
echo "$(basename "$bin"): main thread $a instructions ($n launches), $b ($((2 * n))); per launch: $(( (b - a) * 10 / (11 * n) ))"
if command -v callgrind_annotate >/dev/null; then
    callgrind_annotate --inclusive=yes "$dir/cg.$((2 * n))-01" 2>/dev/null | sed -n '1,60p' > "$dir/annotate.txt"
    echo "inclusive profile of the ${n}x2 run: $dir/annotate.txt"
fi
