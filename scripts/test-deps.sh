#!/usr/bin/env bash
# Installs what vip's tests use when it is missing: libpcap headers (cgo),
# the lab's iproute2 and sysctl, and the peers the lab tests check vip
# against (iputils arping and ping, ndisc6, tcpdump), and tmux, the terminal
# the TUI's end-to-end test types into. Debian package names.
set -euo pipefail

declare -A pkg_for=(
  [ip]=iproute2 [bridge]=iproute2 [sysctl]=procps
  [arping]=iputils-arping [ping]=iputils-ping [ndisc6]=ndisc6 [tcpdump]=tcpdump
  [setpriv]=util-linux [socat]=socat [tmux]=tmux
)
missing=()
for tool in "${!pkg_for[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${pkg_for[$tool]}")
done
[ -e /usr/include/pcap/pcap.h ] || missing+=(libpcap-dev)
[ ${#missing[@]} -eq 0 ] && exit 0

mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" -ne 0 ]; then
  echo "test-deps: missing ${missing[*]}; run as root (sudo make test) to install them, or the tests that need them skip" >&2
  exit 0
fi
echo "test-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
