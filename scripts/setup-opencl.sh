#!/usr/bin/env bash
# Install the OpenCL components the OpenCL backend is tested against:
#   - Debian: PoCL (CPU OpenCL ICD), ocl-icd (the ICD loader with layer support), headers, clinfo;
#   - PyPI:   pyopencl, into its own venv (default <project>/.venv-opencl).
# Intel's OpenCL CPU runtime and the Khronos ICD loader come with the SYCL venv
# (scripts/setup-sycl.sh: <venv>/lib/libintelocl.so, <venv>/lib/libOpenCL.so.1).
#
# usage: scripts/setup-opencl.sh [--venv DIR] [--no-apt] [--no-pyopencl]
#
#   --venv DIR      where pyopencl goes (default: $OFFTRACE_OPENCL_VENV or <project>/.venv-opencl)
#   --no-apt        do not install Debian packages (check that they are there)
#   --no-pyopencl   skip the pyopencl venv
#
# Idempotent and quiet: what is installed is checked and left as it is. Prints one line per
# component; exits non-zero with a message naming what is missing.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${OFFTRACE_OPENCL_VENV:-$here/.venv-opencl}
apt=1
pyocl=1
while [ $# -gt 0 ]; do
  case $1 in
    --venv) venv=$2; shift 2 ;;
    --no-apt) apt=0; shift ;;
    --no-pyopencl) pyocl=0; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup-opencl: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

debs=(pocl-opencl-icd ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-headers clinfo)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$apt" = 0 ]; then
    echo "setup-opencl: missing Debian packages: ${missing[*]} (run without --no-apt, as root)" >&2; exit 1
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "setup-opencl: installing ${missing[*]} needs root (apt-get install -y ${missing[*]})" >&2; exit 1
  fi
  echo "setup-opencl: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || { echo "setup-opencl: apt-get update failed" >&2; exit 1; }
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || { echo "setup-opencl: apt-get install ${missing[*]} failed" >&2; exit 1; }
else
  echo "setup-opencl: Debian packages present (${debs[*]})"
fi
for f in /etc/OpenCL/vendors/pocl.icd /usr/include/CL/cl.h /usr/include/CL/cl_icd.h; do
  [ -e "$f" ] || { echo "setup-opencl: $f missing after install" >&2; exit 1; }
done
# PoCL must show a device through the system loader (ocl-icd).
clinfo -l 2>/dev/null | grep -qi "pthread\|cpu\|pocl" \
  || { echo "setup-opencl: clinfo lists no PoCL device (clinfo -l)" >&2; exit 1; }

if [ "$pyocl" = 1 ]; then
  py=${PYTHON:-python3}
  if [ ! -x "$venv/bin/python" ]; then
    echo "setup-opencl: creating venv $venv"
    "$py" -m venv "$venv" || {
      echo "setup-opencl: $py -m venv failed; on Debian: apt-get install python3-venv" >&2; exit 1; }
  fi
  if "$venv/bin/python" -c "import pyopencl" 2>/dev/null; then
    echo "setup-opencl: pyopencl present in $venv"
  else
    echo "setup-opencl: pip install pyopencl into $venv"
    "$venv/bin/pip" install --disable-pip-version-check -q "pyopencl==2026.1.4" numpy \
      || { echo "setup-opencl: pip install pyopencl failed" >&2; exit 1; }
  fi
  "$venv/bin/python" -c "import pyopencl as cl, sys; sys.exit(0 if cl.get_platforms() else 1)" 2>/dev/null \
    || { echo "setup-opencl: pyopencl finds no OpenCL platform" >&2; exit 1; }
fi
echo "setup-opencl: ok"
