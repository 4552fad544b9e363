# netpool — every target a fresh machine needs. Third-party binaries the tests run (the reference CNI
# plugins, later the envtest kube-apiserver and etcd) are built from the Go module proxy into
# $(NETPOOL_CACHE), keyed by version, so only the first run pays for them.

GO            ?= go
NETPOOL_CACHE ?= $(HOME)/.cache/netpool
export NETPOOL_CACHE
FUZZTIME      ?= 20s
BINARIES      := netpool netpool-agent netpool-controller netpool-egress-router netpoolctl
BINDIR        ?= bin
# VERSION is stamped into every binary (--version, the plugin's about text) and tags the image:
# hack/version.sh, the nearest tag, the commits since it and the commit, "-dirty" with uncommitted
# changes; a clone without tags counts from the committed VERSION file (v0.1.0) the same way.
VERSION       ?= $(shell bash hack/version.sh)
LDFLAGS       := -X github.com/netpool/netpool/internal/version.Version=$(VERSION)

.PHONY: all build version demo test unit bench fuzz lint clean generate image cluster

all: build

build: ## Build the binaries into bin/ (BINDIR), stamped with VERSION
	@mkdir -p $(BINDIR)
	@for b in $(BINARIES); do echo "building $(BINDIR)/$$b"; CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BINDIR)/$$b ./cmd/$$b || exit 1; done
	@echo "built $(VERSION): $(addprefix $(BINDIR)/,$(BINARIES))"

version: ## Print the version that build stamps into the binaries
	@echo $(VERSION)

image: ## One image with every binary (linux/amd64, linux/arm64) as an OCI layout and tarballs in bin/image; no Docker engine needed
	$(GO) run ./hack/image -out bin/image -version "$(VERSION)" -ldflags "$(LDFLAGS)"

demo: ## A real CNI chain (bridge + netpool on bbolt) in network namespaces; needs root
	@if [ "$$(id -u)" != 0 ]; then echo "make demo needs root (it creates network namespaces, veths and a bridge)"; exit 2; fi
	@# Only what the demo runs: netpoolctl here, the plugin by the demo itself (test/harness).
	@$(MAKE) --no-print-directory build BINARIES=netpoolctl
	$(GO) run ./test/demo -netpoolctl $(BINDIR)/netpoolctl

test: lint ## Every test: unit, fuzz seed corpora, process-level, network namespaces (as root), envtest, a real cluster (test/cluster)
	@# Build (or find cached) kube-apiserver and etcd, and the real cluster's binaries (kubelet, containerd,
	@# runc, Multus, ...), first, so that a cold build is not charged to a test's timeout.
	assets="$$(bash hack/envtest-binaries.sh)" && bin="$$(bash hack/cluster-binaries.sh)" && \
	  KUBEBUILDER_ASSETS="$$assets" NETPOOL_CLUSTER_BIN="$$bin" $(GO) test -race -count=1 -timeout 30m ./...

cluster: ## A real cluster on this machine with netpool installed from deploy/ (root, no Docker; docs/real-cluster.md): prints export KUBECONFIG=..., KUBECTL=..., TEST_IMAGE=... and NETPOOL_READY, then stays up until Ctrl-C or SIGTERM and removes itself
	@if [ "$$(id -u)" != 0 ]; then echo "make cluster needs root (network and mount namespaces, cgroups, bridges)"; exit 2; fi
	@assets="$$(bash hack/envtest-binaries.sh)" && bin="$$(bash hack/cluster-binaries.sh)" && \
	  mkdir -p $(BINDIR) && $(GO) build -o $(BINDIR)/netpool-cluster ./test/cluster/run && \
	  KUBEBUILDER_ASSETS="$$assets" NETPOOL_CLUSTER_BIN="$$bin" exec $(BINDIR)/netpool-cluster

unit: ## Only the tests that need neither root, built binaries nor an API server (each of those skips itself under -short, saying why)
	$(GO) test -race -short -count=1 ./...

bench: ## Performance against the peers and the targets, measured in the same run (embedded, Kubernetes, IPAMClaims, controller, 100 hollow nodes, EgressRouter reconcile, egress data path, netpoolctl against kubectl)
	@# Every table is printed even when an earlier one misses a target; the exit status reports any miss.
	@export KUBEBUILDER_ASSETS="$$(bash hack/envtest-binaries.sh)"; rc=0; \
	  for b in ./test/bench ./test/bench/kube ./test/bench/claims ./test/bench/controller ./test/bench/scale ./test/bench/egressreconcile ./test/bench/egress ./test/bench/cli; do \
	    echo "== $$b"; $(GO) run $$b || rc=1; done; exit $$rc

fuzz: ## Run every fuzz target for FUZZTIME each
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

lint: ## gofmt, go vet and staticcheck must be clean
	@out=$$(gofmt -l .); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@# staticcheck is built from hack/tools and cached in $(NETPOOL_CACHE)/tools, keyed by version.
	bash hack/staticcheck.sh ./...

generate: ## Regenerate deepcopy code and CRD YAML (crds/bases, deploy/base/crds) from crds/ipam with controller-gen
	bash hack/generate.sh

clean:
	rm -rf bin
