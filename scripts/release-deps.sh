#!/usr/bin/env bash
# Installs what a release build needs when it is missing: libpcap for amd64,
# and for the arm64 build (cgo) a cross compiler and libpcap for arm64.
set -euo pipefail
missing=()
[ -e /usr/include/pcap/pcap.h ] || missing+=(libpcap-dev)
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
[ -e /usr/lib/aarch64-linux-gnu/libpcap.so ] || missing+=(libpcap-dev:arm64)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "release-deps: missing ${missing[*]}; run as root to install them" >&2
  exit 1
fi
echo "release-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
