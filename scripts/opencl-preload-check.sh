#!/bin/bash
# Preload mode on a machine whose programs load an ICD loader without layer support (CUDA's
# libOpenCL.so.1 first in the ld.so cache or LD_LIBRARY_PATH): every bundled C OpenCL program recorded with
# `offtrace record` (auto), checked for calls and device times; the same programs' output and
# exit status as without offtrace; codeplay_counters' own checks; and, where a layer-capable
# system loader exists, layer mode against forced preload mode on it. No Rust needed: run it
# where the binaries were carried (docs/opencl.md, "Loaders without layer support").
#
# usage: scripts/opencl-preload-check.sh BIN_DIR [PLATFORM]
#   BIN_DIR   holds offtrace, libofftrace_opencl.so (libofftrace_cuda.so optional) and the
#             programs built with `cc -O2 examples/opencl/X.c -lOpenCL -lpthread -o BIN_DIR/X`
#             for X in vector_add codeplay_counters regions ooo_threads many_kernels process_life
#   PLATFORM  a substring of the OpenCL platform's name (default NVIDIA; `Portable` for PoCL)
# Prints one line per check (ok / FAIL) and exits 1 if any failed. Traces go to a temporary
# folder, removed at the end (KEEP=1 keeps it).
set -uo pipefail
bin=$(cd "${1:?usage: $0 BIN_DIR [PLATFORM]}" && pwd)
platform=${2:-NVIDIA}
export OFFTRACE_CL_PLATFORM=$platform
tmp=$(mktemp -d /tmp/opencl-preload-check-XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
failed=0
check() { # name condition-status detail
  if [ "$2" = 0 ]; then echo "ok   $1${3:+: $3}"; else echo "FAIL $1${3:+: $3}"; failed=1; fi
}
# calls, device activities, timed device activities, opencl_interpose of a trace.
summary() {
  "$bin/offtrace" report --format json "$1" 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
calls = sum(c["calls"] for c in r["api_calls"] if c["kind"] == "OPENCL_API")
acts = sum(a["count"] for a in r["device_activity"])
timed = sum(a["device_count"] for a in r["device_activity"])
print(calls, acts, timed, r["trace"]["info"].get("opencl_interpose", "layer"), r["trace"]["complete"])'
}
echo "# libOpenCL.so.1 search: LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} OCL_ICD_FILENAMES=${OCL_ICD_FILENAMES:-}"
for prog in vector_add codeplay_counters regions ooo_threads many_kernels process_life; do
  [ -x "$bin/$prog" ] || { check "$prog" 1 "not built in $bin"; continue; }
  args=()
  case $prog in
    many_kernels) args=(--kernels 2000 --calls 1000) ;;
    process_life) args=(fork 2) ;;
  esac
  "$bin/$prog" "${args[@]}" >"$tmp/$prog.plain.out" 2>"$tmp/$prog.plain.err"
  plain=$?
  "$bin/offtrace" record -o "$tmp/$prog.offtrace" -- "$bin/$prog" "${args[@]}" >"$tmp/$prog.out" 2>"$tmp/$prog.err"
  traced=$?
  if [ $prog = codeplay_counters ]; then
    # Untraced it finds no extension (status 2); traced, offtrace provides it.
    check "$prog: exit status 0 traced" $([ $traced = 0 ]; echo $?) "untraced $plain, traced $traced"
  else
    check "$prog: exit status traced = untraced" $([ $plain = $traced ]; echo $?) "$plain / $traced"
    # Outputs with timings or pointers differ from run to run: compare the line counts.
    a=$(grep -cv "ns\|time\|0x" "$tmp/$prog.plain.out"); b=$(grep -cv "ns\|time\|0x" "$tmp/$prog.out")
    check "$prog: output lines traced = untraced" $([ "$a" = "$b" ]; echo $?) "$a / $b"
  fi
  grep "^offtrace:" "$tmp/$prog.err" | sed "s/^/     /"
  if [ -f "$tmp/$prog.offtrace" ]; then
    read -r calls acts timed mode complete < <(summary "$tmp/$prog.offtrace")
    check "$prog: OpenCL calls recorded" $([ "${calls:-0}" -gt 0 ]; echo $?) "$calls calls, mode $mode, complete $complete"
    check "$prog: every device activity has device times" $([ "${acts:-0}" -gt 0 ] && [ "$acts" = "$timed" ]; echo $?) "$timed of $acts"
  else
    check "$prog: a trace was written" 1
  fi
  if ! grep -q "hint: no SYCL, OpenCL or CUDA call" "$tmp/$prog.err"; then check "$prog: no nothing-recorded hint" 0; else check "$prog: no nothing-recorded hint" 1; fi
done
grep -q "codeplay_counters: ok" "$tmp/codeplay_counters.out" 2>/dev/null
check "codeplay_counters: the program's own checks pass under record" $?

# Layer mode forced on a loader without layer support: nothing recorded, and the hint says so.
"$bin/offtrace" record --opencl-interpose layer -o "$tmp/forced-layer.offtrace" -- "$bin/vector_add" >/dev/null 2>"$tmp/forced-layer.err"
if grep -q "OpenCL layer in preload mode: the program's ICD loader" "$tmp/vector_add.err"; then
  if [ -f "$tmp/forced-layer.offtrace" ] && [ "$(summary "$tmp/forced-layer.offtrace" | cut -d' ' -f1)" -gt 0 ]; then
    echo "note --opencl-interpose layer recorded calls: this loader forwards to one that loads layers"
  else
    grep -q "hint: no SYCL, OpenCL or CUDA call" "$tmp/forced-layer.err"
    check "--opencl-interpose layer on a loader without layers: nothing recorded, the hint line" $? "$(grep "hint: no" "$tmp/forced-layer.err" | head -c 100)"
  fi
fi

# Layer vs forced preload on a layer-capable system loader (Ubuntu's ocl-icd), if there is one.
sys=""
for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu; do
  [ -f "$d/libOpenCL.so.1" ] && grep -q clInitLayer "$d/libOpenCL.so.1" && sys="$d" && break
done
# Only where that loader finds the platform too (Ubuntu's ocl-icd on the H100 host does not list
# NVIDIA's: the program fails there untraced as well).
if [ -n "$sys" ] && ! LD_LIBRARY_PATH=$sys "$bin/vector_add" >/dev/null 2>&1; then
  echo "skip layer vs preload: vector_add finds no platform \"$platform\" through $sys/libOpenCL.so.1 (untraced too)"
  sys=""
  skipped=1
fi
if [ -n "$sys" ]; then
  for mode in layer preload; do
    LD_LIBRARY_PATH=$sys "$bin/offtrace" record --opencl-interpose $mode -o "$tmp/cmp-$mode.offtrace" -- "$bin/vector_add" >/dev/null 2>&1
    "$bin/offtrace" report --format json "$tmp/cmp-$mode.offtrace" >"$tmp/cmp-$mode.json"
  done
  "$bin/offtrace" report --format json "$tmp/vector_add.offtrace" >"$tmp/cmp-auto.json" 2>/dev/null
  python3 - "$tmp/cmp-layer.json" "$tmp/cmp-preload.json" "$tmp/cmp-auto.json" <<'EOF'
import json, sys
def load(p):
    r = json.load(open(p))
    calls = {c["operation"]: c["calls"] for c in r["api_calls"]}
    acts = sorted((a["kind"], a["name"], a["count"], a["device_count"]) for a in r["device_activity"])
    return calls, acts
(lc, la), (pc, pa) = load(sys.argv[1]), load(sys.argv[2])
diff = {k: (lc.get(k), pc.get(k)) for k in set(lc) | set(pc) if lc.get(k) != pc.get(k)}
print("ok  " if not diff else "FAIL", "vector_add on", sys.argv[1].split("/")[-1], "vs preload: calls per operation", "equal" if not diff else diff)
print("ok  " if la == pa else "FAIL", "vector_add layer vs preload: device activities", "equal" if la == pa else (la, pa))
ok = not diff and la == pa
# The first run (auto, the program's own loader: CUDA's on the device host) against layer mode
# on the system loader: the same calls per operation (a loader or ICD that called its own
# exported clXxx by symbol would show up here as extra calls).
try:
    ac, aa = load(sys.argv[3])
    adiff = {k: (lc.get(k), ac.get(k)) for k in set(lc) | set(ac) if lc.get(k) != ac.get(k)}
    print("ok  " if not adiff else "FAIL", "vector_add auto (its own loader) vs layer on the system loader: calls per operation",
          "equal" if not adiff else adiff)
    kinds = lambda acts: sorted((k, n, c, d) for k, n, c, d in acts)
    print("ok  " if kinds(aa) == kinds(la) else "FAIL", "vector_add auto vs layer on the system loader: device activities",
          "equal" if kinds(aa) == kinds(la) else (aa, la))
    ok = ok and not adiff and kinds(aa) == kinds(la)
except (OSError, ValueError) as e:
    print("FAIL vector_add auto trace unreadable:", e)
    ok = False
sys.exit(0 if ok else 1)
EOF
  [ $? = 0 ] || failed=1
elif [ -z "${skipped:-}" ]; then
  echo "skip layer vs preload: no layer-capable libOpenCL.so.1 in the system folders"
fi
echo "# traces: $tmp$([ "${KEEP:-0}" = 1 ] || echo ' (removed)')"
exit $failed
