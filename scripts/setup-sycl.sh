#!/usr/bin/env bash
# Install Intel's SYCL runtime (2026.2, from PyPI) into the project's own venv.
#
# usage: scripts/setup-sycl.sh [--venv DIR] [--no-dpnp]
#
#   --venv DIR   where to create the venv (default: <project>/.venv, or $OFFTRACE_SYCL_VENV)
#   --no-dpnp    skip dpnp (about 1.3 GB more; the workloads examples/sycl/w0-w4 import it, the other
#                examples do not)
#
# Idempotent: an existing venv with the runtime is checked and left as it is. pip's cache
# (~/.cache/pip) makes a re-install fast but is not required.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${OFFTRACE_SYCL_VENV:-$here/.venv}
dpnp=1
while [ $# -gt 0 ]; do
  case $1 in
    --venv) venv=$2; shift 2 ;;
    --no-dpnp) dpnp=0; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup-sycl: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

# Pinned: the reference facts in docs/reference/ were measured on exactly these versions.
pkgs=(intel-sycl-rt==2026.2.0 intel-opencl-rt==2026.2.0 dpctl==0.22.1)
[ "$dpnp" = 1 ] && pkgs+=(dpnp==0.20.0)

py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null; then
  echo "setup-sycl: $py not found; install Python 3.10-3.13 (apt-get install python3 python3-venv)" >&2
  exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
  echo "setup-sycl: creating venv $venv"
  "$py" -m venv "$venv" || {
    echo "setup-sycl: python3 -m venv failed; on Debian/Ubuntu: apt-get install python3-venv" >&2; exit 1; }
fi
if "$venv/bin/python" - "$dpnp" <<'PY' 2>/dev/null
import sys, importlib.util
need = ["dpctl"] + (["dpnp"] if sys.argv[1] == "1" else [])
sys.exit(0 if all(importlib.util.find_spec(m) for m in need) else 1)
PY
then
  [ -e "$venv/lib/libsycl.so.9" ] && [ -e "$venv/lib/libxptifw.so.1" ] && {
    echo "setup-sycl: SYCL runtime already installed in $venv"; exit 0; }
fi
echo "setup-sycl: installing ${pkgs[*]} into $venv (about 1.6 GB, 2.9 GB with dpnp)"
"$venv/bin/pip" install --disable-pip-version-check -q "${pkgs[@]}"
for f in libsycl.so.9 libxptifw.so.1 libintelocl.so libsycl_ur_trace_collector.so; do
  [ -e "$venv/lib/$f" ] || { echo "setup-sycl: $venv/lib/$f missing after install" >&2; exit 1; }
done
LD_LIBRARY_PATH="$venv/lib" OCL_ICD_FILENAMES="$venv/lib/libintelocl.so" \
  "$venv/bin/python" -c "import dpctl, sys; d = dpctl.get_devices(); print('setup-sycl: devices:', d); sys.exit(0 if d else 1)" \
  || { echo "setup-sycl: the SYCL runtime found no device (OpenCL CPU runtime not loading?)" >&2; exit 1; }
