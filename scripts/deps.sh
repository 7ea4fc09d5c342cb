#!/usr/bin/env bash
# Installs the Debian packages the build, the tests and the demo need.
# As root it installs what is missing; otherwise it prints the apt-get line and fails.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libibverbs-dev librdmacm-dev ibverbs-utils perftest rdmacm-utils python3-pyverbs
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libpcap-dev libdeflate-dev
  iproute2 procps python3-scapy tshark
  clang-14 libclang-rt-14-dev
  ucx-utils libfabric-bin python3-matplotlib valgrind
  openmpi-bin libopenmpi-dev strace
  infiniband-diags opensm ibsim-utils libibumad-dev libibmad-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "softverbs: missing Debian packages. Run as root:" >&2
  echo "  apt-get update && $line" >&2
  exit 1
fi
echo "softverbs: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
