#!/usr/bin/env bash
# Builds kubectl of the Kubernetes version the tests run (hack/envtest's go.mod), from source fetched
# through the Go module proxy only, and caches it outside the clone, for the benchmarks' same-run
# baselines (make bench: kubectl get beside netpoolctl pools).
#
#   KUBECTL="$(hack/kubectl-binary.sh)"
#
# stdout: only the path of kubectl. Progress goes to stderr. Cache:
# ${NETPOOL_CACHE:-$HOME/.cache/netpool}/kubectl/<version>/kubectl. A kubectl that
# hack/cluster-binaries.sh built from the same module and version is taken as it is.
set -euo pipefail

log() { printf 'kubectl-binary: %s\n' "$*" >&2; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${NETPOOL_CACHE:-${HOME:?HOME is not set}/.cache/netpool}"
export GOWORK=off
export GOFLAGS="-mod=readonly -buildvcs=false -trimpath"
export CGO_ENABLED=0
unset GOOS GOARCH GOBIN
command -v go >/dev/null || { log "go is not on PATH"; exit 1; }

version="$(awk '$1 == "require" { $1 = ""; $0 = $0 } $1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$here/envtest/go.mod")"
[[ -n "$version" ]] || { log "k8s.io/kubernetes is not in hack/envtest/go.mod"; exit 1; }
dest="$cache/kubectl/$version"
if [[ -x "$dest/kubectl" ]]; then
	log "cached: $dest/kubectl"
	printf '%s\n' "$dest/kubectl"
	exit 0
fi
mkdir -p "$cache/kubectl"
tmp="$(mktemp -d "$cache/kubectl/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
for built in "$cache"/cluster/k8s-"$version"-*/kubectl; do
	if [[ -x "$built" ]]; then
		log "taking $built (hack/cluster-binaries.sh, the same module and version)"
		cp "$built" "$tmp/kubectl"
		break
	fi
done
if [[ ! -x "$tmp/kubectl" ]]; then
	log "building kubectl $version (a few minutes on a cold cache)"
	start=$SECONDS
	(cd "$here/envtest" && go build -o "$tmp/kubectl" k8s.io/kubernetes/cmd/kubectl)
	log "built kubectl in $((SECONDS - start))s"
fi
# Another run may have finished first; its directory is as complete as this one.
if ! mv -T "$tmp" "$dest" 2>/dev/null && [[ ! -x "$dest/kubectl" ]]; then
	log "failed to move the build into $dest"
	exit 1
fi
trap - EXIT
rm -rf "$tmp"
printf '%s\n' "$dest/kubectl"
