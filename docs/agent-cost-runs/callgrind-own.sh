#!/bin/bash
# offtrace's own instructions in a traced run of usm_pipeline.py 200, per thread (callgrind
# --separate-threads): on the application's threads, everything below the agent's trampolines
# (the bridge, the services, the recorder's entries); the writer thread whole. These do not
# depend on the machine's load (the whole program's count does: the runtime's threads spin).
# usage: callgrind-own.sh AGENT.so [AGENT.so ...]   (from the repository root, after a release build)
# OPENCL=1: the agent also as the OpenCL layer (OPENCL_LAYERS=<agent>), as `offtrace record` runs it.
V=${OFFTRACE_SYCL_VENV:-$PWD/.venv}
for agent in "$@"; do
  out=$(mktemp -d /tmp/cg-own-XXXXXX)
  env -u XPTI_SUBSCRIBERS LD_LIBRARY_PATH=$V/lib OCL_ICD_FILENAMES=$V/lib/libintelocl.so OPENBLAS_NUM_THREADS=1 \
    XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER=$V/lib/libxptifw.so.1 UR_ENABLE_LAYERS=UR_LAYER_TRACING \
    OFFTRACE_OUTPUT=$out/t.offtrace XPTI_SUBSCRIBERS=$agent ${OPENCL:+OPENCL_LAYERS=$agent} \
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=$out/cg $V/bin/python \
    examples/sycl/usm_pipeline.py 200 > $out/log 2>&1
  total=$(grep -m1 Collected $out/log | awk '{print $4}')
  app=0; writer=0
  for f in $out/cg-*; do
    ann=$(callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$f" 2>/dev/null)
    # The writer thread: writer_main is (nearly) all of it. (The thread that started it also
    # names writer_main, in the spawn.)
    if echo "$ann" | grep -E 'writer::writer_main \[' | grep -qE '\((9[0-9]|100)\.[0-9]+%\)'; then
      writer=$(grep -m1 '^summary' "$f" | awk '{print $2}')
    fi
    # callgrind lists the trampoline once per source file its code comes from (inlined code):
    # the largest of its inclusive counts is the whole.
    t=$(echo "$ann" | awk '/offtrace_sycl::streams::trampoline/ {gsub(",","",$1); if ($1+0 > m) m=$1+0} END{print m+0}')
    app=$((app + t))
  done
  records=$(python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(); print(struct.unpack_from("<Q",d,len(d)-12)[0] if d[-24:-20]==b"OTEN" else "?")' $out/t.offtrace 2>/dev/null)
  echo "$(basename "$agent") $agent: whole program $total; application threads below the trampolines $app; writer thread $writer; own $((app + writer)); records $records"
  rm -rf "$out"
done
