// Command claims measures what an IPAMClaim costs an ADD in Kubernetes mode, on one envtest
// kube-apiserver + etcd with the IPAMClaim CRD: a node agent runs in this process behind its real
// unix socket, its API client wrapped by a round-tripper that counts every request, and the
// plugin's verbs (in this process too) forward each call to it as the netpool binary does.
//
// Four kinds of ADD, -adds of each, one at a time so that every request is the ADD's own:
//
//   - plain: a NAD without allowPersistentIPs;
//   - opt-in: allowPersistentIPs, the pod's network selection element without a claim;
//   - claim: allowPersistentIPs and an ipam-claim-reference, the claim's first ADD;
//   - restart: the same claim again after a DEL, as a restarted VM on the same node.
//
// It prints the API requests per ADD by verb and the median ADD latency, and exits non-zero
// unless a claim's first ADD costs at most one read (the claim) and one write (its status) more
// than an opt-in ADD without a claim.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/go-logr/logr"
	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/netpool/netpool/cni-plugin/agent"
	"github.com/netpool/netpool/cni-plugin/agentproto"
	"github.com/netpool/netpool/cni-plugin/ipamplugin"
	"github.com/netpool/netpool/internal/podowner"
	"github.com/netpool/netpool/test/bench/benchenv"
	"github.com/netpool/netpool/test/bench/benchproc"
)

func main() {
	adds := flag.Int("adds", 100, "ADDs of each kind")
	noFailExit := flag.Bool("no-fail-exit", false, "exit 0 even when the target is missed")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	rows, err := run(context.Background(), *adds)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	ok := print(os.Stdout, rows, *adds)
	if !ok && !*noFailExit {
		os.Exit(1)
	}
}

// counter counts the API requests of the agent by "VERB resource", watches excepted (they are
// the informers' long-lived streams, not a call's).
type counter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.URL.Query().Get("watch") != "true" {
			c.mu.Lock()
			c.counts[verbOf(r)]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

// verbOf names a request as the API server's audit log would: the verb and the resource.
func verbOf(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	resource := ""
	// /api/v1/namespaces/ns/pods/name, /apis/g/v/namespaces/ns/ipamclaims/name/status, /apis/g/v/kind/name
	for i := 0; i < len(parts); i++ {
		if parts[i] == "namespaces" && i+2 < len(parts) {
			i++
			continue
		}
		if i >= 2 && (parts[0] == "apis" && i >= 3 || parts[0] == "api" && i >= 2) {
			resource = parts[i]
			if i+2 < len(parts) {
				resource += "/" + parts[i+2]
			}
			break
		}
	}
	return r.Method + " " + resource
}

func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// row is one kind of ADD: the requests its ADDs made, by verb, and their latencies.
type row struct {
	name     string
	requests map[string]int
	took     []time.Duration
}

func run(ctx context.Context, adds int) ([]row, error) {
	root, err := benchenv.Root()
	if err != nil {
		return nil, err
	}
	claimsDir, err := benchproc.Output(exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/k8snetworkplumbingwg/ipamclaims"))
	if err != nil {
		return nil, err
	}
	plane, err := benchenv.Start(root, benchenv.Options{CRDDirs: []string{filepath.Join(claimsDir, "artifacts")}, QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, err
	}
	defer func() { _ = plane.Stop() }()
	cfg, c := plane.Config, plane.Client
	dir, err := os.MkdirTemp("", "npbc")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	socket := filepath.Join(dir, "agent.sock")

	count := &counter{counts: map[string]int{}}
	acfg := rest.CopyConfig(cfg)
	acfg.Wrap(count.wrap)
	a, err := agent.New(acfg, agent.Options{NodeName: "node-a", Socket: socket, Log: slog.New(slog.DiscardHandler), Stderr: io.Discard})
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(actx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-a.Ready():
	case err := <-done:
		return nil, fmt.Errorf("agent stopped: %w", err)
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("agent not ready after 30s")
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vms"}}); err != nil {
		return nil, err
	}
	p := &plugin{socket: socket}

	kinds := []struct {
		name, subnet string
		optIn        bool
		claim        bool
	}{
		{"plain", "10.90.0.0/16", false, false},
		{"opt-in, no claim", "10.91.0.0/16", true, false},
		{"claim, first add", "10.92.0.0/16", true, true},
	}
	var rows []row
	for _, k := range kinds {
		conf := p.conf(k.name, k.subnet, k.optIn)
		// One ADD first, not counted: the pool's creation and its first slice are once per pool.
		if err := p.podAndClaim(ctx, c, "warm-"+slug(k.name), k.claim, k.name); err != nil {
			return nil, err
		}
		if _, err := p.add("warm-"+slug(k.name), conf); err != nil {
			return nil, err
		}
		r := row{name: k.name}
		pods := make([]string, adds)
		for i := range adds {
			pods[i] = fmt.Sprintf("%s-%d", slug(k.name), i)
			if err := p.podAndClaim(ctx, c, pods[i], k.claim, k.name); err != nil {
				return nil, err
			}
		}
		count.take()
		for _, pod := range pods {
			took, err := p.add(pod, conf)
			if err != nil {
				return nil, err
			}
			r.took = append(r.took, took)
		}
		r.requests = count.take()
		rows = append(rows, r)
		if k.claim {
			// The VMs restart on this node: DEL, then ADD of the same claim from a new container.
			for _, pod := range pods {
				if err := p.call("DEL", pod, pod, conf); err != nil {
					return nil, err
				}
			}
			count.take()
			restart := row{name: "claim, VM restart"}
			for _, pod := range pods {
				took, err := p.add(pod+"-again", conf, pod)
				if err != nil {
					return nil, err
				}
				restart.took = append(restart.took, took)
			}
			restart.requests = count.take()
			rows = append(rows, restart)
		}
	}
	return rows, nil
}

func slug(s string) string {
	return strings.NewReplacer(" ", "", ",", "-").Replace(s)
}

// plugin runs the plugin's verbs in this process, forwarding to the agent as the binary does.
type plugin struct {
	socket string
	out    bytes.Buffer
}

func (p *plugin) conf(name, subnet string, optIn bool) []byte {
	extra := ""
	if optIn {
		extra = `,"allowPersistentIPs":true`
	}
	return fmt.Appendf(nil, `{"cniVersion":"1.1.0","name":"bench-%s","ipam":{"type":"netpool","datastore":"kubernetes","kubernetes":{"agent_socket":%q},"range":%q%s}}`,
		slug(name), p.socket, subnet, extra)
}

// podAndClaim creates pod vms/name (and, with claim, its IPAMClaim) as KubeVirt would.
func (p *plugin) podAndClaim(ctx context.Context, c client.Client, name string, claim bool, kind string) error {
	el := map[string]any{"name": "bench", "interface": "net1"}
	if claim {
		el["ipam-claim-reference"] = name + ".net1"
		if err := c.Create(ctx, &ipamclaimsv1.IPAMClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: name + ".net1"},
			Spec: ipamclaimsv1.IPAMClaimSpec{Network: "bench-" + slug(kind), Interface: "net1"}}); err != nil {
			return err
		}
	}
	ann, err := json.Marshal([]any{el})
	if err != nil {
		return err
	}
	return c.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: name, Annotations: map[string]string{podowner.NetworksAnnotation: string(ann)}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher"}}},
	})
}

// add runs one ADD for container id of pod (default: the pod named id) and returns its latency.
func (p *plugin) add(id string, conf []byte, pod ...string) (time.Duration, error) {
	name := id
	if len(pod) > 0 {
		name = pod[0]
	}
	start := time.Now()
	err := p.call("ADD", id, name, conf)
	return time.Since(start), err
}

func (p *plugin) call(verb, id, pod string, conf []byte) error {
	p.out.Reset()
	pl := &ipamplugin.Plugin{
		ReadFile:  func(path string) ([]byte, error) { return nil, fmt.Errorf("%s: %w", path, fs.ErrNotExist) },
		OpenStore: ipamplugin.OpenStore, Stdout: &p.out, Stderr: io.Discard, Forward: agentproto.Call,
	}
	f := pl.Funcs()
	fn := map[string]func(*skel.CmdArgs) error{"ADD": f.Add, "DEL": f.Del}[verb]
	err := fn(&skel.CmdArgs{ContainerID: id, IfName: "net1", Netns: "/var/run/netns/" + id,
		Args: "K8S_POD_NAMESPACE=vms;K8S_POD_NAME=" + pod, StdinData: conf})
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, id, err)
	}
	return nil
}

// print writes the table and reports whether the target holds.
func print(w io.Writer, rows []row, adds int) bool {
	fmt.Fprintf(w, "IPAMClaim cost per ADD (%d ADDs of each kind, one at a time, one agent)\n", adds)
	fmt.Fprintf(w, "%-20s %-10s %-10s %-100s %s\n", "ADD", "reads", "writes", "requests per ADD", "p50")
	per := map[string][2]float64{}
	for _, r := range rows {
		var reads, writes int
		var parts []string
		keys := make([]string, 0, len(r.requests))
		for k := range r.requests {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			n := r.requests[k]
			if strings.HasPrefix(k, "GET ") {
				reads += n
			} else {
				writes += n
			}
			parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(n)/float64(adds)))
		}
		slices.Sort(r.took)
		per[r.name] = [2]float64{float64(reads) / float64(adds), float64(writes) / float64(adds)}
		fmt.Fprintf(w, "%-20s %-10.2f %-10.2f %-100s %s\n", r.name, per[r.name][0], per[r.name][1], strings.Join(parts, ", "),
			r.took[len(r.took)/2].Round(10*time.Microsecond))
	}
	base, claim := per["opt-in, no claim"], per["claim, first add"]
	ok := claim[0]-base[0] <= 1 && claim[1]-base[1] <= 1
	verdict := "met"
	if !ok {
		verdict = "MISSED"
	}
	fmt.Fprintf(w, "target: a claim's first ADD costs at most 1 read (the claim) and 1 write (its status) more than an opt-in ADD: +%.2f reads, +%.2f writes: %s\n",
		claim[0]-base[0], claim[1]-base[1], verdict)
	return ok
}
