#!/usr/bin/env bash
# Check the system tools the build and the tests need, and install the missing ones with apt-get
# (Debian/Ubuntu; as root, or through sudo). Idempotent: installs nothing when all are present.
#
#   C and C++ compilers (cc, gcc, g++) and make: the dispatcher's C++ shim, the C test programs,
#                         the reference subscriber, the example tools
#   python3 with venv and pip: the SYCL runtime comes from PyPI into a venv
#   flock (util-linux), curl, ca-certificates: script locking, downloads
#
# The Rust toolchain is not installed here: see README.md (rustup, toolchain 1.95 with rustfmt and
# clippy).
set -euo pipefail
missing=()
for c in cc gcc g++ make flock curl; do command -v "$c" >/dev/null || missing+=("$c"); done
command -v python3 >/dev/null || missing+=(python3)
if command -v python3 >/dev/null; then
  python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
fi
[ ${#missing[@]} = 0 ] && { echo "setup-system: compilers, make, python3 with venv, flock and curl present"; exit 0; }
echo "setup-system: missing: ${missing[*]}"
command -v apt-get >/dev/null || {
  echo "setup-system: no apt-get here: install a C/C++ compiler, make, python3 (3.10-3.13) with venv, flock and curl" >&2
  exit 1
}
sudo=
[ "$(id -u)" = 0 ] || sudo=sudo
pkgs=(build-essential python3 python3-venv python3-pip util-linux curl ca-certificates)
echo "setup-system: apt-get install ${pkgs[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${pkgs[@]}"
