#!/usr/bin/env bash
# Regenerates what is derived from the API types under crds/ipam/ and crds/network/, with
# controller-gen:
#
#   crds/<api>/<version>/zz_generated.deepcopy.go  DeepCopy methods of every type
#   crds/bases/<group>_<plural>.yaml               one CustomResourceDefinition per kind
#                                                  (groups ipam.netpool.io and network.netpool.io)
#   deploy/base/crds/<group>_<plural>.yaml              the same files, so that a cluster operator can
#                                                  `kubectl apply -k deploy/base`
#   deploy/base/controller-role.yaml                    the controller's ClusterRole and leader election
#                                                  Role, from the RBAC markers in controller/
#
#   hack/generate.sh        write into this checkout (make generate)
#   hack/generate.sh DIR    write the same tree under DIR instead; crds/generate_test.go compares
#                           that with the committed files to catch stale output
#
# controller-gen is built from hack/tools (its own go.mod, which pins sigs.k8s.io/controller-tools)
# through the Go module proxy, and cached outside the clone keyed by version:
# ${NETPOOL_CACHE:-$HOME/.cache/netpool}/tools/controller-gen-<version>. The first run on a machine
# builds it (about 20 s with a warm module cache); later runs reuse it.
set -euo pipefail

log() { printf 'generate: %s\n' "$*" >&2; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
tools="$here/tools"
out="${1:-$root}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

command -v go >/dev/null || { log "go is not on PATH"; exit 1; }

version="$(awk '$1 == "sigs.k8s.io/controller-tools" && $2 ~ /^v/ { print $2; exit }' "$tools/go.mod")"
[[ -n "$version" ]] || { log "sigs.k8s.io/controller-tools is not in $tools/go.mod"; exit 1; }
cache="${NETPOOL_CACHE:-${HOME:?HOME is not set}/.cache/netpool}/tools"
gen="$cache/controller-gen-$version"

if [[ ! -x "$gen" ]]; then
	mkdir -p "$cache"
	tmp="$(mktemp "$cache/.controller-gen-$version.XXXXXX")"
	trap 'rm -f "$tmp"' EXIT
	log "building controller-gen $version into $cache"
	# A build of its own: no workspace, no caller GOFLAGS, and a readonly module graph, since
	# hack/tools/go.sum is committed complete.
	GOWORK=off GOFLAGS="-mod=readonly -trimpath -buildvcs=false" CGO_ENABLED=0 \
		go build -C "$tools" -o "$tmp" sigs.k8s.io/controller-tools/cmd/controller-gen
	# A rename is atomic, so a concurrent run sees either no binary or a complete one.
	mv -f "$tmp" "$gen"
	trap - EXIT
fi

cd "$root"
export GOWORK=off

# DeepCopy methods, next to the types of each API version.
for dir in crds/ipam/*/ crds/network/*/; do
	dir="${dir%/}"
	mkdir -p "$out/$dir"
	"$gen" object paths="./$dir" output:object:dir="$out/$dir"
done

# CRDs into a fresh directory first, so that a kind that was removed leaves no YAML behind. Only
# files named like controller-gen's output (<group>_<plural>.yaml) are replaced, so other files in
# deploy/base/crds (a kustomization, say) are left alone.
crdtmp="$(mktemp -d)"
trap 'rm -rf "$crdtmp"' EXIT
"$gen" crd paths=./crds/ipam/... paths=./crds/network/... output:crd:dir="$crdtmp"
for dest in "$out/crds/bases" "$out/deploy/base/crds"; do
	mkdir -p "$dest"
	rm -f "$dest"/ipam.netpool.io_*.yaml "$dest"/network.netpool.io_*.yaml
	cp "$crdtmp"/*.yaml "$dest/"
done
log "wrote $(cd "$crdtmp" && echo *.yaml) into $out/crds/bases and $out/deploy/base/crds"

# The controller's RBAC, from the +kubebuilder:rbac markers above its reconcilers.
rbactmp="$(mktemp -d)"
trap 'rm -rf "$crdtmp" "$rbactmp"' EXIT
"$gen" rbac:roleName=netpool-controller paths=./controller/... output:rbac:dir="$rbactmp"
mkdir -p "$out/deploy/base"
cp "$rbactmp/role.yaml" "$out/deploy/base/controller-role.yaml"
log "wrote deploy/base/controller-role.yaml into $out"
