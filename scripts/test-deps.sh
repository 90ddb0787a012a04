#!/usr/bin/env bash
# Installs what vip's build and tests use when it is missing: the C compiler
# and libpcap headers vip is built with (cgo, for --filter), the lab's iproute2
# and sysctl, the peers the lab tests check vip against (iputils arping and
# ping, ndisc6, tcpdump, socat), setpriv, tmux (the terminal the TUI's
# end-to-end test types into), prometheus and promtool (the metrics lab
# test), etcd and etcdctl (the store the fleet's lab tests run in lab hosts),
# keepalived (the failover vipbench and its lab test time vip's against, run
# in a lab host) and clang, llvm-strip and libbpf's headers (the eBPF
# responder's program).
# Debian package names.
#
# Root installs with apt-get; anyone else through sudo, and without sudo it
# stops and says what to install. `test-deps.sh build` checks only what the
# build needs (make build runs it): it installs that as root and otherwise
# stops, never asking for sudo, so that no vip is built without its capture.
set -euo pipefail

mode=${1:-all}
# iproute2 and procps install into sbin, which a user's PATH often lacks.
PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin
# The compiler cgo runs: $CC, else gcc (go env CC's default).
cc=${CC:-gcc}
cc=${cc%% *}

declare -A test_pkg=(
  [ip]=iproute2 [bridge]=iproute2 [sysctl]=procps
  [arping]=iputils-arping [ping]=iputils-ping [ndisc6]=ndisc6 [tcpdump]=tcpdump
  [setpriv]=util-linux [socat]=socat [tmux]=tmux
  [prometheus]=prometheus [promtool]=prometheus
  [etcd]=etcd-server [etcdctl]=etcd-client [keepalived]=keepalived
  [clang]=clang [llvm-strip]=llvm
)

# Packages whose install enables and starts a server for the whole host
# (Debian's way), each with its systemd unit: the tests start their own
# inside lab namespaces.
declare -A service_of=([prometheus]=prometheus.service [etcd-server]=etcd.service [keepalived]=keepalived.service)

# check sets missing to the packages that provide what is not here.
check() {
  missing=()
  # gcc only recommends the C library's headers, which cgo needs as well.
  command -v "$cc" >/dev/null 2>&1 || missing+=(gcc libc6-dev)
  [ -e /usr/include/stdio.h ] || missing+=(libc6-dev)
  [ -e /usr/include/pcap/pcap.h ] || missing+=(libpcap-dev)
  if [ "$mode" != build ]; then
    for tool in "${!test_pkg[@]}"; do
      command -v "$tool" >/dev/null 2>&1 || missing+=("${test_pkg[$tool]}")
    done
    [ -e /usr/include/bpf/bpf_helpers.h ] || missing+=(libbpf-dev)
  fi
  [ ${#missing[@]} -eq 0 ] || mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
}

# fail says in one sentence what is missing and how to install it.
fail() {
  if [ "$mode" = build ]; then
    echo "vip is built with cgo and libpcap (for --filter capture expressions): run \"make deps\", or \"apt-get install ${missing[*]}\" as root" >&2
  else
    echo "vip's build and tests need ${missing[*]}: run \"apt-get install ${missing[*]}\" as root, or \"make deps\" as a user with sudo" >&2
  fi
  exit 1
}

check
[ ${#missing[@]} -eq 0 ] && exit 0

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  { [ "$mode" != build ] && command -v sudo >/dev/null 2>&1; } || fail
  as_root=(sudo)
fi
echo "test-deps: installing ${missing[*]}" >&2
# A failed install is reported by the check after it, in one sentence.
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq || true
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || true
installed=("${missing[@]}")
check
# Debian's prometheus, etcd-server and keepalived packages enable and start
# a server (on :9090, on localhost:2379, VRRP from /etc/keepalived) for the
# whole host; the tests start their own inside lab namespaces, so the ones
# the install started are stopped and disabled again.
if [ -d /run/systemd/system ]; then
  for pkg in "${installed[@]}"; do
    unit=${service_of[$pkg]:-}
    [ -n "$unit" ] || continue
    "${as_root[@]}" systemctl disable --now "$unit" >/dev/null 2>&1 || true
    echo "test-deps: stopped and disabled the $unit its package $pkg started (the tests run their own)" >&2
  done
fi
[ ${#missing[@]} -eq 0 ] || fail
