#!/bin/bash
# Instructions of the whole traced program (all threads, callgrind): untraced, main's agent, this
# branch's (typed only and with the raw layer), and a subscriber with empty callbacks (what the
# runtime costs when observed). Run from the repository root after a release build.
V=${OFFTRACE_SYCL_VENV:-$PWD/.venv}
MAIN_AGENT=${MAIN_AGENT:?set MAIN_AGENT to the libofftrace_agent.so of a release build of main}
NULLSUB=${NULLSUB:?cc -O2 -shared -fPIC scripts/null-subscriber.c -L$V/lib -l:libxptifw.so.1 -o libnullsub.so}
common="LD_LIBRARY_PATH=$V/lib OCL_ICD_FILENAMES=$V/lib/libintelocl.so"
run() { tag=$1; shift; echo -n "$tag: "; env -u XPTI_SUBSCRIBERS -u XPTI_TRACE_ENABLE $common "$@" valgrind --tool=callgrind --callgrind-out-file=/dev/null $V/bin/python examples/sycl/usm_pipeline.py 200 2>&1 | grep Collected; }
tr="XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER=$V/lib/libxptifw.so.1 UR_ENABLE_LAYERS=UR_LAYER_TRACING OFFTRACE_OUTPUT=/tmp/ac-cge.offtrace"
run untraced
run main-agent $tr XPTI_SUBSCRIBERS=$MAIN_AGENT
run branch-agent $tr XPTI_SUBSCRIBERS=$PWD/target/release/libofftrace_agent.so
run branch-agent-raw $tr OFFTRACE_RAW=1 XPTI_SUBSCRIBERS=$PWD/target/release/libofftrace_agent.so
run null-subscriber $tr XPTI_SUBSCRIBERS=$NULLSUB
