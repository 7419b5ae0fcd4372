#!/usr/bin/env bash
# offtrace's main job on a bundled example, from a fresh clone:
#   0. installs the system packages it needs when missing (scripts/setup-system.sh, apt-get),
#   1. installs Intel's SYCL runtime into .venv, or $OFFTRACE_SYCL_VENV (scripts/setup-sycl.sh;
#      skipped when present),
#   2. builds offtrace (release),
#   3. records examples/sycl/usm_pipeline.py on the SYCL runtime's OpenCL CPU device
#      (--intel-opencl: without it the program sees only /etc/OpenCL/vendors' devices, as it
#      does untraced, and dpctl's USM allocations fail on PoCL), prints the report, writes a
#      Perfetto trace.
# Outputs land in demo-out/: usm_pipeline.offtrace, usm_pipeline.pftrace (open it in
# https://ui.perfetto.dev), report.json.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
venv=${OFFTRACE_SYCL_VENV:-$here/.venv}
scripts/setup-system.sh
scripts/setup-sycl.sh --venv "$venv" --no-dpnp
echo "demo: building offtrace (release)"
cargo build --release --locked -p offtrace-cli -p offtrace-agent -p offtrace-xptifw
bin=target/release/offtrace
mkdir -p demo-out
rm -f demo-out/usm_pipeline.offtrace
"$bin" record --intel-opencl --runtime "$venv" -o demo-out/usm_pipeline.offtrace -- "$venv/bin/python" examples/sycl/usm_pipeline.py
"$bin" report demo-out/usm_pipeline.offtrace
"$bin" report demo-out/usm_pipeline.offtrace --format json > demo-out/report.json
"$bin" export demo-out/usm_pipeline.offtrace --format perfetto -o demo-out/usm_pipeline.pftrace
echo "demo: wrote demo-out/usm_pipeline.pftrace (open in https://ui.perfetto.dev) and demo-out/report.json"
