#!/usr/bin/env bash
# Runs its arguments as root: as they are when already root, else under
# sudo. `make test` runs the test binaries with it (go test -exec), having
# compiled them as the user, and `make demo` the lab.
#
# sudo resets what the tests need, so it is passed on: PATH (test/e2e's tests
# run go, which sudo's secure_path lacks) with root's sbin directories (ip
# and sysctl, which a user's PATH may lack), CI, and the Go settings, with
# -buildvcs=false (git refuses root a repository the user owns). Root keeps
# its own Go build and module caches (sudo sets HOME to root's), so nothing
# root-owned lands in the user's caches; it reads the modules from the user's
# module cache as a file proxy, offline.
set -euo pipefail

[ "$(id -u)" -eq 0 ] && exec "$@"
command -v sudo >/dev/null 2>&1 || {
  echo "the lab and its tests need root: run make as root, or install sudo" >&2
  exit 1
}

keep=("PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin")
[ -n "${CI:-}" ] && keep+=("CI=$CI")
while IFS= read -r name; do
  case "$name" in
  GOCACHE | GOMODCACHE | GOPATH | GOENV | GOFLAGS | GOPROXY) ;;
  GO*) keep+=("$name=${!name}") ;;
  esac
done < <(compgen -e)
if command -v go >/dev/null 2>&1; then
  { read -r modcache; read -r proxy; read -r flags; } < <(go env GOMODCACHE GOPROXY GOFLAGS)
  keep+=("GOPROXY=file://$modcache/cache/download${proxy:+,$proxy}" "GOFLAGS=${flags:+$flags }-buildvcs=false")
fi
exec sudo env "${keep[@]}" "$@"
