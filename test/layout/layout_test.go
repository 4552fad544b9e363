package layout

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/netpool/netpool"

// rule says that the packages matching from (but not except) may not depend, directly or
// through others, on any package matching one of not.
type rule struct {
	why    string
	from   []string
	except []string
	not    []string
}

// rules are the layout's dependency rules. A pattern is a package path; "x/..." also matches every
// package below x.
var rules = []rule{
	{
		why:  "the IPAM plugin runs once per attachment: its start-up is the hot path (a process that loads client-go makes ~50 Creates/s where a warm agent makes ~300/s)",
		from: []string{module + "/cmd/netpool"},
		not:  []string{"k8s.io/...", "sigs.k8s.io/...", "crypto/tls/..."},
	},
	{
		why:  "the egress-router plugin runs in the pod's network namespace once per router: it reads its NAD config and nothing of the cluster",
		from: []string{module + "/cmd/netpool-egress-router"},
		not:  []string{"k8s.io/...", "sigs.k8s.io/...", "crypto/tls/...", module + "/crds/network/v1"},
	},
	{
		why:  "ipam is the pure address logic every part shares",
		from: []string{module + "/ipam/..."},
		not:  []string{module + "/allocator/...", module + "/cni-plugin/...", module + "/controller/...", module + "/cli/...", module + "/crds/...", module + "/internal/...", "k8s.io/...", "sigs.k8s.io/..."},
	},
	{
		why:  "the allocation engine is ipam and the Store interface; the stores are below it",
		from: []string{module + "/allocator"},
		not:  []string{module + "/allocator/boltstore", module + "/allocator/kubestore", module + "/cni-plugin/...", module + "/controller/...", module + "/cli/...", "k8s.io/...", "sigs.k8s.io/..."},
	},
	{
		why: "the shared models are imported by the daemons and the CLI, so they import neither, nor controller-runtime (which netpoolctl does not link)",
		from: []string{module + "/internal/ippool", module + "/internal/gcpolicy", module + "/internal/reservation",
			module + "/internal/scheme", module + "/internal/podowner", module + "/internal/kubeclient"},
		not: []string{module + "/controller/...", module + "/cni-plugin/...", module + "/cli/...", module + "/allocator/kubestore",
			module + "/allocator/boltstore", "sigs.k8s.io/controller-runtime/..."},
	},
	{
		why: "netpoolctl is an admin tool: it links no daemon's implementation and no controller-runtime (its client package alone " +
			"links metrics, leader election, every informer and the clientset, ~350 packages); it talks to the API server through internal/kubeclient",
		from: []string{module + "/cmd/netpoolctl", module + "/cli/..."},
		not: []string{module + "/controller/...", module + "/cni-plugin/agent", module + "/allocator/kubestore",
			"sigs.k8s.io/controller-runtime/...", "k8s.io/client-go/kubernetes", "k8s.io/client-go/informers",
			"k8s.io/client-go/tools/leaderelection", "k8s.io/kubectl/...", "sigs.k8s.io/kustomize/..."},
	},
	{
		why:  "the node agent and the controller are separate daemons",
		from: []string{module + "/cmd/netpool-agent"},
		not:  []string{module + "/controller/...", module + "/cli/..."},
	},
	{
		why:  "the node agent and the controller are separate daemons",
		from: []string{module + "/cmd/netpool-controller"},
		not:  []string{module + "/cni-plugin/...", module + "/allocator/...", module + "/cli/..."},
	},
	{
		why:  "the API types are imported by everyone, the CNI plugins included",
		from: []string{module + "/crds/ipam/v1alpha1", module + "/crds/network/v1/..."},
		not:  []string{module + "/allocator/...", module + "/cni-plugin/...", module + "/controller/...", module + "/cli/...", module + "/internal/...", "k8s.io/client-go/...", "sigs.k8s.io/controller-runtime/...", "k8s.io/api/..."},
	},
	{
		why:  "make demo is the bare-host quick start: it builds and links no Kubernetes client and no kustomize, so a cold run stays short",
		from: []string{module + "/test/demo"},
		not:  []string{"k8s.io/...", "sigs.k8s.io/...", module + "/test/envtest", module + "/test/harness/kustomize"},
	},
	{
		why:  "test/cluster runs kubelet and the control plane as binaries (hack/cluster-binaries.sh); linking k8s.io/kubernetes would multiply its -race build time",
		from: []string{module + "/test/cluster/..."},
		not:  []string{"k8s.io/kubernetes/..."},
	},
	{
		why:  "the test cluster's images are one static binary each, the pod sandbox and a tiny server",
		from: []string{module + "/test/cluster/images/..."},
		not:  []string{"k8s.io/...", "sigs.k8s.io/...", module + "/..."},
	},
	{
		why:    "no product code imports the test harnesses",
		from:   []string{module + "/cmd/...", module + "/allocator/...", module + "/cni-plugin/...", module + "/controller/...", module + "/cli/...", module + "/internal/...", module + "/ipam/..."},
		except: []string{module + "/controller/internal/ctrltest", module + "/allocator/storetest"},
		not:    []string{module + "/test/...", module + "/controller/internal/ctrltest", module + "/allocator/storetest", "sigs.k8s.io/controller-runtime/pkg/envtest"},
	},
}

// reconcilers are the packages of the controller's reconcilers: none imports another, so a change
// to one compiles and tests that one.
var reconcilers = []string{"poolstatus", "gc", "node", "slice", "nad", "derivedpool", "egressrouter"}

// matches reports whether path matches pattern.
func matches(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// dependencies lists every package of the module (tests left out) with its dependencies.
func dependencies(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		deps[fields[0]] = fields[1:]
	}
	if len(deps) < 40 {
		t.Fatalf("go list found %d packages: %s", len(deps), out)
	}
	return deps
}

// violations checks rules against deps and says which package depends on what it may not.
func violations(rules []rule, deps map[string][]string) []string {
	var bad []string
	for pkg, ds := range deps {
		for _, r := range rules {
			in := func(p string) bool { return matches(p, pkg) }
			if !slices.ContainsFunc(r.from, in) || slices.ContainsFunc(r.except, in) {
				continue
			}
			for _, d := range ds {
				if slices.ContainsFunc(r.not, func(p string) bool { return matches(p, d) }) {
					bad = append(bad, pkg+" depends on "+d+": "+r.why)
				}
			}
		}
	}
	slices.Sort(bad)
	return bad
}

func TestWhoMayImportWhom(t *testing.T) {
	deps := dependencies(t)
	all := rules
	for _, r := range reconcilers {
		var others []string
		for _, o := range reconcilers {
			if o != r {
				others = append(others, module+"/controller/internal/"+o)
			}
		}
		all = append(all, rule{why: "no reconciler imports another", from: []string{module + "/controller/internal/" + r}, not: others})
	}
	for _, r := range all {
		for _, p := range r.from {
			if !slices.ContainsFunc(mapKeys(deps), func(pkg string) bool { return matches(p, pkg) }) {
				t.Errorf("rule %q names %s, which is no package: the layout moved, move the rule", r.why, p)
			}
		}
	}
	for _, v := range violations(all, deps) {
		t.Error(v)
	}
}

// netpoolctlMaxPackages bounds the packages netpoolctl links, the standard library's included (what
// `go list -deps ./cmd/netpoolctl | wc -l` counts): 846 when it imported the controller, 785 with
// controller-runtime's client, 431 on internal/kubeclient.
const netpoolctlMaxPackages = 600

// TestNetpoolctlLinksLittle: a new import that drags a heavy tree into netpoolctl fails here, with
// the count, before it lands in every admin's binary.
func TestNetpoolctlLinksLittle(t *testing.T) {
	deps, ok := dependencies(t)[module+"/cmd/netpoolctl"]
	if !ok {
		t.Fatal("go list did not list cmd/netpoolctl")
	}
	if n := len(deps) + 1; n > netpoolctlMaxPackages {
		t.Errorf("cmd/netpoolctl links %d packages, over %d: see what a new import pulls in (go list -deps ./cmd/netpoolctl)", n, netpoolctlMaxPackages)
	}
}

func mapKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// TestViolations shows that a rule finds what it forbids, directly or through another package, and
// nothing else.
func TestViolations(t *testing.T) {
	r := []rule{{why: "w", from: []string{"a/..."}, except: []string{"a/test"}, not: []string{"k8s.io/...", "x"}}}
	deps := map[string][]string{
		"a":      {"fmt", "k8s.io/client-go/rest"},
		"a/b":    {"x", "xy"},
		"a/test": {"x"},
		"ab":     {"x"},
		"other":  {"k8s.io/api"},
	}
	got := strings.Join(violations(r, deps), "\n")
	want := "a depends on k8s.io/client-go/rest: w\na/b depends on x: w"
	if got != want {
		t.Fatalf("violations:\n%s\nwant:\n%s", got, want)
	}
}
