#!/bin/bash
# Instructions of the whole program as a user records it: `offtrace record` itself under
# callgrind (--trace-children: the program's process is counted, the CLI's own process is the
# small second count), against the program untraced, and the same recording with Intel's XPTI
# dispatcher (`--dispatcher intel`) for comparison; REPS rounds (default 3), the three
# interleaved in each round: compare medians. `record`'s defaults: offtrace's dispatcher, the
# agent as XPTI subscriber with UR_LAYER_TRACING, and as the OpenCL layer (device times).
# OPENBLAS_NUM_THREADS=1 everywhere (numpy's BLAS pool spins for 6-20 M instructions at random).
# Run from the repository root after
#   cargo build --release -p offtrace-cli -p offtrace-agent -p offtrace-xptifw
# Both recordings get Intel's OpenCL CPU device as the untraced run does, through
# OCL_ICD_FILENAMES (which `record` leaves as it is; builds before `--intel-opencl` set it
# themselves).
# Each round also writes `report --format json` of both recordings to $OUT (default /tmp) so
# that what was recorded can be compared.
V=${OFFTRACE_SYCL_VENV:-$PWD/.venv}
O=${OFFTRACE:-$PWD/target/release/offtrace}
OUT=${OUT:-/tmp}
PROG=${PROG:-examples/sycl/usm_pipeline.py 200}
common="LD_LIBRARY_PATH=$V/lib OCL_ICD_FILENAMES=$V/lib/libintelocl.so OPENBLAS_NUM_THREADS=1"
cg="valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=/dev/null"
for r in $(seq ${REPS:-3}); do
  echo -n "untraced: "; env $common $cg $V/bin/python $PROG 2>&1 | grep Collected
  echo "record: "; env OPENBLAS_NUM_THREADS=1 OCL_ICD_FILENAMES=$V/lib/libintelocl.so $cg $O record -o $OUT/cg-record.offtrace -- $V/bin/python $PROG 2>&1 | grep -E "Collected|records"
  $O report $OUT/cg-record.offtrace --format json > $OUT/cg-record-$r.json
  echo "record-intel: "; env OPENBLAS_NUM_THREADS=1 OCL_ICD_FILENAMES=$V/lib/libintelocl.so $cg $O record --dispatcher intel -o $OUT/cg-record-intel.offtrace -- $V/bin/python $PROG 2>&1 | grep -E "Collected|records"
  $O report $OUT/cg-record-intel.offtrace --format json > $OUT/cg-record-intel-$r.json
done
rm -f $OUT/cg-record.offtrace $OUT/cg-record-intel.offtrace
