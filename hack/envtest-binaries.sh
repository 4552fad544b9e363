#!/usr/bin/env bash
# Builds the two binaries that controller-runtime's envtest needs, kube-apiserver and etcd,
# from source fetched through the Go module proxy only, and caches them outside the clone.
#
#   KUBEBUILDER_ASSETS="$(hack/envtest-binaries.sh)"
#   hack/envtest-binaries.sh envtest-minimum   # the oldest Kubernetes netpool supports
#
# stdout: only the directory that holds kube-apiserver and etcd. Progress goes to stderr.
# The argument names a tools module under hack/ (default: envtest, the version the tests run;
# envtest-minimum is the minimum Kubernetes version the README states, for test/deploy).
# Versions come from its go.mod (k8s.io/kubernetes, go.etcd.io/etcd/server/v3).
# Cache: ${NETPOOL_CACHE:-$HOME/.cache/netpool}/envtest/k8s-<v>-etcd-<v>/. Idempotent: when
# both binaries are there it returns at once; otherwise it builds into a temporary directory
# beside it and renames that into place, so a directory that exists is always complete.
set -euo pipefail

log() { printf 'envtest-binaries: %s\n' "$*" >&2; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module_name="${1:-envtest}"
[[ "$module_name" =~ ^[a-z0-9-]+$ && -f "$here/$module_name/go.mod" ]] || {
	log "no tools module hack/$module_name (want envtest or envtest-minimum)"
	exit 1
}
mod="$here/$module_name"
cache_base="${NETPOOL_CACHE:-${HOME:?HOME is not set}/.cache/netpool}/envtest"

# A build of its own: no workspace, no caller GOFLAGS (e.g. -mod=mod, which could write
# go.sum), a readonly module graph (go.sum is committed complete), static host binaries.
export GOWORK=off
export GOFLAGS="-mod=readonly -buildvcs=false -trimpath"
export CGO_ENABLED=0
unset GOOS GOARCH GOBIN

command -v go >/dev/null || { log "go is not on PATH"; exit 1; }

# Read the versions straight from go.mod (tidy lists every selected module there), so a
# cached run needs neither the module graph nor the network.
modver() {
	local v
	v="$(awk -v m="$1" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' "$mod/go.mod")"
	[[ -n "$v" ]] || { log "$1 is not in $mod/go.mod"; exit 1; }
	printf '%s\n' "$v"
}
k8s_version="$(modver k8s.io/kubernetes)"
etcd_version="$(modver go.etcd.io/etcd/server/v3)"
key="k8s-${k8s_version}-etcd-${etcd_version}"
dest="$cache_base/$key"

complete() { [[ -x "$1/kube-apiserver" && -x "$1/etcd" ]]; }

if complete "$dest"; then
	log "cached: $dest"
	printf '%s\n' "$dest"
	exit 0
fi

mkdir -p "$cache_base"

# Serialise concurrent runs (e.g. parallel make targets) where flock exists; the rename
# below is safe without it too.
if command -v flock >/dev/null; then
	exec 9>"$cache_base/.lock-$key"
	flock 9
	if complete "$dest"; then
		log "built by another run: $dest"
		printf '%s\n' "$dest"
		exit 0
	fi
fi

tmp="$(mktemp -d "$cache_base/.tmp-$key.XXXXXX")"
chmod 0755 "$tmp"
trap 'rm -rf "$tmp"' EXIT

# v1.37.2 -> major 1, minor 37; the apiserver reports these through /version.
ver="${k8s_version#v}"
major="${ver%%.*}"
minor="${ver#*.}"
minor="${minor%%.*}"
build_date="$(go -C "$mod" list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes 2>/dev/null || true)"
: "${build_date:=1970-01-01T00:00:00Z}"
vpkg=k8s.io/component-base/version
ldflags="-s -w"
ldflags+=" -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=$major -X $vpkg.gitMinor=$minor"
ldflags+=" -X $vpkg.gitCommit= -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=$build_date"

log "building kube-apiserver $k8s_version and etcd $etcd_version with $(go version | cut -d' ' -f3) (cold: 5-10 min on 2 cores)"
start=$SECONDS
# One go build for both, so their shared dependencies are compiled once.
go -C "$mod" build -ldflags "$ldflags" -o "$tmp/" k8s.io/kubernetes/cmd/kube-apiserver ./etcd >&2

"$tmp/kube-apiserver" --version >&2
"$tmp/etcd" --version >&2

if ! mv -T "$tmp" "$dest" 2>/dev/null; then
	# Someone else finished first (or a stale, incomplete directory is in the way).
	if complete "$dest"; then
		log "another run finished first; keeping $dest"
	else
		rm -rf "$dest"
		mv -T "$tmp" "$dest"
	fi
fi
log "built in $((SECONDS - start))s: $dest"
printf '%s\n' "$dest"
