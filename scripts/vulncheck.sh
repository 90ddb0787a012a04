#!/usr/bin/env bash
# govulncheck against a vulnerability database built here: the machines reach
# the Go module proxy but not vuln.go.dev, so the database comes from the
# golang.org/x/vulndb module (its OSV files, indexed by its own indexdb).
#
# It fails on any vulnerability that vip's code calls in a module it
# requires. Vulnerabilities in the Go standard library are fixed by a newer
# Go toolchain, not by this repository: they are listed, and fail the run
# only with VULNCHECK_STRICT=1.
set -euo pipefail
cd "$(dirname "$0")/.."
VULNDB_VERSION=${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}
GOVULNCHECK_VERSION=${GOVULNCHECK_VERSION:-latest}
export GOFLAGS=-buildvcs=false

db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
src=$(go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
go run "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION" -vulns "$src/data/osv" -out "$db/db"

out=$(go run "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION" -db "file://$db/db" -format json ./...)
# Each finding names the module of the vulnerable symbol in its trace; a
# finding with a function in its first frame is one vip's code reaches.
called=$(printf '%s' "$out" | python3 -c '
import json, sys
dec = json.JSONDecoder(); s = sys.stdin.read(); i = 0; seen = set()
while i < len(s):
    while i < len(s) and s[i].isspace(): i += 1
    if i >= len(s): break
    obj, i = dec.raw_decode(s, i)
    f = obj.get("finding")
    if not f or not f.get("trace") or not f["trace"][0].get("function"): continue
    mod = f["trace"][0].get("module", "")
    seen.add(("stdlib" if mod == "stdlib" else "module") + " " + f["osv"] + " " + mod + " fixed in " + f.get("fixed_version", "?"))
print("\n".join(sorted(seen)))
')
if [ -z "$called" ]; then
  echo "govulncheck: no vulnerability reached from vip's code"
  exit 0
fi
echo "govulncheck: vulnerabilities reached from vip's code:"
echo "$called"
if grep -q '^module ' <<<"$called"; then
  echo "govulncheck: a required module is vulnerable where vip calls it: upgrade it" >&2
  exit 1
fi
if [ "${VULNCHECK_STRICT:-0}" = 1 ]; then
  exit 1
fi
echo "govulncheck: only the Go standard library is affected, fixed by a newer Go toolchain than this machine's $(go env GOVERSION)"
