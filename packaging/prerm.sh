#!/bin/sh
# Runs before the vip package is removed (Debian: prerm remove; RPM: %preun
# with 0 packages left). An agent left running would go on holding its
# addresses with a binary that is gone, so the agent's claims are released
# first: an unguarded agent's addresses stop being answered and those it
# added leave the interface; a guarded agent's keys go from the store, so
# that the standbys take the addresses at once rather than at the lease's
# expiry. Then the service is stopped and disabled. An upgrade (Debian:
# prerm upgrade; RPM: 1 package left) keeps everything: the new agent takes
# the claims over. Nothing here fails the removal.
set -u
case "${1:-}" in
remove | deconfigure | 0) ;;
*) exit 0 ;;
esac
# The packaged agent's socket (vip-agent.service), or VIP_SOCKET's.
sock=${VIP_SOCKET:-/run/vip/vip.sock}
if [ -S "$sock" ] && command -v vip >/dev/null 2>&1; then
	vip release --all --socket "$sock" >/dev/null 2>&1 || true
fi
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	systemctl --no-reload disable vip-agent.service >/dev/null 2>&1 || true
	systemctl stop vip-agent.service >/dev/null 2>&1 || true
fi
exit 0
