#!/bin/bash
# Instructions of the whole traced program (all threads, callgrind): untraced, main's agent, this
# branch's, and a subscriber with empty callbacks (what the runtime costs when observed), REPS
# rounds (default 3), the configurations interleaved in each round: compare medians.
# OPENBLAS_NUM_THREADS=1 in every run: numpy's BLAS pool (the example checks its results with
# numpy) spins for 6-20 M instructions per run at random, more than the differences measured here.
# Intel's XPTI dispatcher (the venv's libxptifw.so.1), as `offtrace record --dispatcher intel`; what
# `offtrace record` runs by default (offtrace's dispatcher) is measured by callgrind-record.sh.
# OPENCL=1: the agent also as the OpenCL layer (OPENCL_LAYERS=<agent>), as `offtrace record` runs
# it: the OpenCL calls the SYCL runtime's adapter makes inside each UR call are recorded too.
# NULLSUB= (empty) skips the empty-subscriber runs.
# Run from the repository root after a release build.
V=${OFFTRACE_SYCL_VENV:-$PWD/.venv}
MAIN_AGENT=${MAIN_AGENT:?set MAIN_AGENT to the libofftrace_agent.so of a release build of main}
NULLSUB=${NULLSUB-${NULLSUB:?cc -O2 -shared -fPIC scripts/null-subscriber.c -L$V/lib -l:libxptifw.so.1 -o libnullsub.so}}
BRANCH_AGENT=${BRANCH_AGENT:-$PWD/target/release/libofftrace_agent.so}
common="LD_LIBRARY_PATH=$V/lib OCL_ICD_FILENAMES=$V/lib/libintelocl.so OPENBLAS_NUM_THREADS=1"
run() { tag=$1; shift; echo -n "$tag: "; env -u XPTI_SUBSCRIBERS -u XPTI_TRACE_ENABLE $common "$@" valgrind --tool=callgrind --callgrind-out-file=/dev/null $V/bin/python examples/sycl/usm_pipeline.py 200 2>&1 | grep Collected; }
tr="XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER=$V/lib/libxptifw.so.1 UR_ENABLE_LAYERS=UR_LAYER_TRACING OFFTRACE_OUTPUT=/tmp/cg-e2e-$$.offtrace"
for r in $(seq ${REPS:-3}); do
  run untraced
  run main-agent $tr XPTI_SUBSCRIBERS=$MAIN_AGENT ${OPENCL:+OPENCL_LAYERS=$MAIN_AGENT}
  run branch-agent $tr XPTI_SUBSCRIBERS=$BRANCH_AGENT ${OPENCL:+OPENCL_LAYERS=$BRANCH_AGENT}
  [ -n "$NULLSUB" ] && run null-subscriber $tr XPTI_SUBSCRIBERS=$NULLSUB
done
