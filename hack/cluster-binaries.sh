#!/usr/bin/env bash
# Builds everything a real Kubernetes node needs besides kube-apiserver and etcd (those come from
# hack/envtest-binaries.sh), from source fetched through the Go module proxy only, and caches it
# outside the clone, for test/cluster and make cluster:
#
#   NETPOOL_CLUSTER_BIN="$(hack/cluster-binaries.sh)"
#
# - kubelet, kube-proxy, kube-scheduler, kube-controller-manager and kubectl: the Kubernetes version
#   of hack/envtest/go.mod (the tools module the envtest build uses, staging replace block and all),
#   in one go build so that their shared packages compile once;
# - containerd, ctr and containerd-shim-runc-v2;
# - runc with seccomp (cgo and libseccomp: kubelet always asks for the RuntimeDefault profile for
#   the pod sandbox, which a runc without seccomp refuses);
# - the reference CNI plugins of the version in the root go.mod (loopback, bridge, host-local,
#   macvlan, portmap);
# - Multus of the version in hack/multus/go.mod: multus (thin), multus-daemon and multus-shim (thick).
#
# stdout: only the directory. Progress goes to stderr: a line per binary with its build time (a
# cold build takes 20-50 minutes on 2 cores). Cache:
# ${NETPOOL_CACHE:-$HOME/.cache/netpool}/cluster/k8s-<v>-containerd-<v>-runc-<v>-cni-<v>-multus-<v>/.
# Idempotent: when the directory exists it is complete (it is built beside it and renamed into
# place), and concurrent runs wait for each other on a lock.
set -euo pipefail

# The whole script is one function, parsed before it runs: an edit of this file during a long build
# cannot change what the running build does next.
main() {
log() { printf 'cluster-binaries: %s\n' "$*" >&2; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
cache_base="${NETPOOL_CACHE:-${HOME:?HOME is not set}/.cache/netpool}/cluster"

containerd_version=v2.4.2
runc_version=v1.5.3
containerd_module=github.com/containerd/containerd/v2
runc_module=github.com/opencontainers/runc
cni_module=github.com/containernetworking/plugins
multus_module=gopkg.in/k8snetworkplumbingwg/multus-cni.v4

export GOWORK=off
export GOFLAGS="-buildvcs=false -trimpath"
unset GOOS GOARCH GOBIN

command -v go >/dev/null || { log "go is not on PATH"; exit 1; }

# modver FILE MODULE: the version FILE (a go.mod) requires, read straight from the file so that a
# cached run needs neither the module graph nor the network.
modver() {
	local v
	v="$(awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' "$1")"
	[[ -n "$v" ]] || { log "$2 is not in $1"; exit 1; }
	printf '%s\n' "$v"
}
k8s_version="$(modver "$here/envtest/go.mod" k8s.io/kubernetes)"
cni_version="$(modver "$root/go.mod" "$cni_module")"
multus_version="$(modver "$here/multus/go.mod" "$multus_module")"
key="k8s-${k8s_version}-containerd-${containerd_version}-runc-${runc_version}-cni-${cni_version}-multus-${multus_version}"
dest="$cache_base/$key"

kube_bins=(kubelet kube-proxy kube-scheduler kube-controller-manager kubectl)
containerd_bins=(containerd ctr containerd-shim-runc-v2)
cni_bins=(loopback bridge host-local macvlan portmap)
multus_bins=(multus multus-daemon multus-shim)
all_bins=("${kube_bins[@]}" "${containerd_bins[@]}" runc "${cni_bins[@]}" "${multus_bins[@]}")

complete() {
	local b
	for b in "${all_bins[@]}"; do
		[[ -x "$1/$b" ]] || return 1
	done
}

if complete "$dest"; then
	log "cached: $dest"
	printf '%s\n' "$dest"
	exit 0
fi

mkdir -p "$cache_base"
exec 9>"$cache_base/.lock-$key"
if command -v flock >/dev/null; then
	flock 9
	if complete "$dest"; then
		log "built by another run: $dest"
		printf '%s\n' "$dest"
		exit 0
	fi
fi

# runc links libseccomp through cgo, and kube-proxy's nftables mode runs nft: install what is
# missing with the system's package manager, and say exactly what is needed when that is impossible.
seccomp_ok() { [[ -f /usr/include/seccomp.h ]] || { command -v pkg-config >/dev/null && pkg-config --exists libseccomp; }; }
missing=()
seccomp_ok || missing+=(libseccomp-dev)
command -v nft >/dev/null || missing+=(nftables)
if ((${#missing[@]})); then
	if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
		log "installing ${missing[*]} (runc's seccomp support needs libseccomp; kube-proxy's nftables mode runs nft)"
		export DEBIAN_FRONTEND=noninteractive
		if ! apt-get install -y "${missing[@]}" >&2; then
			apt-get update >&2 && apt-get install -y "${missing[@]}" >&2 || {
				log "apt-get could not install ${missing[*]}; install them (Fedora: libseccomp-devel nftables) and run again"
				exit 1
			}
		fi
	else
		log "missing ${missing[*]}: install them as root (Debian/Ubuntu: apt-get install ${missing[*]}; Fedora: libseccomp-devel nftables), then run again"
		exit 1
	fi
fi
command -v gcc >/dev/null || command -v cc >/dev/null || {
	log "runc needs a C compiler for cgo (Debian/Ubuntu: gcc)"
	exit 1
}

tmp="$(mktemp -d "$cache_base/.tmp-$key.XXXXXX")"
chmod 0755 "$tmp"
trap 'rm -rf "$tmp"' EXIT

total=$SECONDS
built() { # built SECONDS NAME...: one line per binary, with the time of the build that made it
	local t=$1 b
	shift
	for b in "$@"; do
		[[ -x "$tmp/$b" ]] || { log "$b missing after its build"; exit 1; }
		log "built $b in ${t}s"
	done
}

# containerd: module mode at the exact version (its go.mod has no replace directives).
pkgs=()
for b in "${containerd_bins[@]}"; do pkgs+=("$containerd_module/cmd/$b@$containerd_version"); done
log "building ${containerd_bins[*]} $containerd_version"
start=$SECONDS
CGO_ENABLED=0 GOBIN="$tmp" go install -tags "no_btrfs no_devmapper no_zfs" -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version" "${pkgs[@]}" >&2
built $((SECONDS - start)) "${containerd_bins[@]}"

log "building runc $runc_version (cgo, seccomp)"
start=$SECONDS
CGO_ENABLED=1 GOBIN="$tmp" go install -tags "seccomp urfave_cli_no_docs" -ldflags "-s -w -X main.version=${runc_version#v}" "$runc_module@$runc_version" >&2
built $((SECONDS - start)) runc

pkgs=()
for b in "${cni_bins[@]}"; do
	case $b in
	host-local) pkgs+=("$cni_module/plugins/ipam/$b@$cni_version") ;;
	portmap) pkgs+=("$cni_module/plugins/meta/$b@$cni_version") ;;
	*) pkgs+=("$cni_module/plugins/main/$b@$cni_version") ;;
	esac
done
log "building the CNI plugins ${cni_bins[*]} $cni_version"
start=$SECONDS
CGO_ENABLED=0 GOBIN="$tmp" go install -ldflags "-s -w" "${pkgs[@]}" >&2
built $((SECONDS - start)) "${cni_bins[@]}"

# Multus: its tools module (hack/multus, whose go.sum is committed complete), since the module proxy
# serves its exact version only, which go install pkg@version cannot resolve.
pkgs=()
for b in "${multus_bins[@]}"; do pkgs+=("$multus_module/cmd/$b"); done
log "building ${multus_bins[*]} $multus_version"
start=$SECONDS
CGO_ENABLED=0 go -C "$here/multus" build -mod=readonly -ldflags "-s -w" -o "$tmp/" "${pkgs[@]}" >&2
built $((SECONDS - start)) "${multus_bins[@]}"

# Kubernetes: the envtest tools module, whose go.sum is committed complete for these commands.
ver="${k8s_version#v}"
major="${ver%%.*}"
minor="${ver#*.}"
minor="${minor%%.*}"
vpkg=k8s.io/component-base/version
ldflags="-s -w"
ldflags+=" -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=$major -X $vpkg.gitMinor=$minor"
ldflags+=" -X $vpkg.gitCommit= -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
pkgs=()
for b in "${kube_bins[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
log "building ${kube_bins[*]} $k8s_version in one go build (cold: 15-30 min on 2 cores)"
start=$SECONDS
CGO_ENABLED=0 go -C "$here/envtest" build -mod=readonly -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}" >&2
built $((SECONDS - start)) "${kube_bins[@]}"

"$tmp/kubelet" --version >&2
"$tmp/containerd" --version >&2
"$tmp/runc" --version >&2

if ! mv -T "$tmp" "$dest" 2>/dev/null; then
	# A stale, incomplete directory is in the way (the lock keeps out a concurrent build).
	if complete "$dest"; then
		log "another run finished first; keeping $dest"
	else
		rm -rf "$dest"
		mv -T "$tmp" "$dest"
	fi
fi
trap - EXIT
log "all built in $((SECONDS - total))s: $dest"
printf '%s\n' "$dest"
}
main "$@"
exit
