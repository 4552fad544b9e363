#!/usr/bin/env bash
# Runs staticcheck over the module: hack/staticcheck.sh [packages...] (default ./...).
#
# staticcheck is built from hack/tools (its own go.mod, which pins honnef.co/go/tools) through the
# Go module proxy, and cached outside the clone keyed by version:
# ${NETPOOL_CACHE:-$HOME/.cache/netpool}/tools/staticcheck-<version>. The first run on a machine
# builds it (under a minute with a warm module cache); later runs reuse it.
set -euo pipefail

log() { printf 'staticcheck: %s\n' "$*" >&2; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
tools="$here/tools"

command -v go >/dev/null || { log "go is not on PATH"; exit 1; }

version="$(awk '$1 == "honnef.co/go/tools" && $2 ~ /^v/ { print $2; exit }' "$tools/go.mod")"
[[ -n "$version" ]] || { log "honnef.co/go/tools is not in $tools/go.mod"; exit 1; }
cache="${NETPOOL_CACHE:-${HOME:?HOME is not set}/.cache/netpool}/tools"
bin="$cache/staticcheck-$version"

if [[ ! -x "$bin" ]]; then
	mkdir -p "$cache"
	tmp="$(mktemp "$cache/.staticcheck-$version.XXXXXX")"
	trap 'rm -f "$tmp"' EXIT
	log "building staticcheck $version into $cache"
	# A build of its own: no workspace, no caller GOFLAGS, and a readonly module graph, since
	# hack/tools/go.sum is committed complete.
	GOWORK=off GOFLAGS="-mod=readonly -trimpath -buildvcs=false" CGO_ENABLED=0 \
		go build -C "$tools" -o "$tmp" honnef.co/go/tools/cmd/staticcheck
	# A rename is atomic, so a concurrent run sees either no binary or a complete one.
	mv -f "$tmp" "$bin"
	trap - EXIT
fi

cd "$root"
if [[ $# -eq 0 ]]; then
	set -- ./...
fi
exec "$bin" "$@"
