package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/cni-plugin/agentproto"
	"github.com/netpool/netpool/cni-plugin/ipamplugin"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
)

// TestAgent drives two agents (two simulated nodes) through the plugin's forwarding path, as the
// netpool binary does, and checks results and CNI error codes.
func TestAgent(t *testing.T) {
	env := envtest.Shared(t)
	dir := socketDir(t)
	metricsAddr := freePort(t)
	na := MustRun(t, env, "node-a", filepath.Join(dir, "a.sock"), Options{MetricsBindAddress: metricsAddr})
	nb := MustRun(t, env, "node-b", filepath.Join(dir, "b.sock"), Options{})
	sh := newShim()

	t.Run("ADD, CHECK, DEL and GC on two nodes of one pool", func(t *testing.T) {
		extra := `,"range":"10.70.0.0/24","gateway":"10.70.0.1"`
		seen := map[string]string{}
		for i := range 5 {
			for _, n := range []*running{na, nb} {
				id := fmt.Sprintf("%s-%d", n.agent.opts.NodeName, i)
				out, err := sh.call("ADD", id, "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p"+id, netConf("net1", n.socket, extra))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(out, `"gateway": "10.70.0.1"`) || !strings.Contains(out, `"cniVersion": "1.1.0"`) {
					t.Errorf("result = %s", out)
				}
				ip := firstIP(t, out)
				if prev, dup := seen[ip]; dup {
					t.Fatalf("%s and %s both got %s", prev, id, ip)
				}
				seen[ip] = id
			}
		}
		var ip0 string
		for ip, id := range seen {
			if id == "node-a-0" {
				ip0 = ip
			}
		}
		prev := func(ip string) []byte {
			return []byte(strings.Replace(string(netConf("net1", na.socket, extra)), `"ipam"`,
				`"prevResult":{"cniVersion":"1.1.0","ips":[{"address":"`+ip+`/24"}]},"ipam"`, 1))
		}
		if _, err := sh.call("CHECK", "node-a-0", "", prev(ip0)); err != nil {
			t.Errorf("CHECK = %v", err)
		}
		_, err := sh.call("CHECK", "node-a-0", "", prev("10.70.0.250"))
		wantCode(t, err, ipamplugin.CodeCheckFailed, "10.70.0.250 is in the result of node-a-0/net1 but not allocated to it")
		if out, err := sh.call("DEL", "node-a-0", "", netConf("net1", na.socket, extra)); err != nil || out != "" {
			t.Errorf("DEL = %q, %v", out, err)
		}
		if _, err := sh.call("DEL", "node-a-0", "", netConf("net1", na.socket, extra)); err != nil {
			t.Errorf("repeated DEL = %v", err)
		}
		_, err = sh.call("CHECK", "node-a-0", "", prev(ip0))
		wantCode(t, err, ipamplugin.CodeCheckFailed, "node-a-0/net1 holds no address")
		gc := []byte(strings.Replace(string(netConf("net1", na.socket, extra)), `"ipam"`,
			`"cni.dev/valid-attachments":[{"containerID":"node-a-1","ifname":"net1"}],"ipam"`, 1))
		if _, err := sh.call("GC", "", "", gc); err != nil {
			t.Fatal(err)
		}
		left := map[string]bool{}
		var list ipamv1.OverlappingRangeIPReservationList
		if err := env.Client.List(context.Background(), &list, client.MatchingLabels{ipamv1.PoolLabel: "10.70.0.0-24"}); err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Items {
			left[r.Spec.ContainerID] = true
			if r.Spec.PodRef != "ns/p"+r.Spec.ContainerID {
				t.Errorf("%s: podRef %q", r.Name, r.Spec.PodRef)
			}
		}
		if len(left) != 6 || !left["node-a-1"] || left["node-a-2"] || !left["node-b-4"] {
			t.Errorf("after GC on node-a: %v, want node-a-1 and node-b's five", left)
		}
		if _, err := sh.call("STATUS", "", "", netConf("net1", nb.socket, extra)); err != nil {
			t.Errorf("STATUS = %v", err)
		}
	})

	t.Run("a pool exhausted exactly at capacity: the next ADD gets 100", func(t *testing.T) {
		extra := `,"range":"10.71.0.0/28"` // 14 addresses
		var mu sync.Mutex
		var wg sync.WaitGroup
		ok, full := map[string]bool{}, 0
		for i := range 10 {
			for _, n := range []*running{na, nb} {
				wg.Go(func() {
					s := newShim()
					out, err := s.call("ADD", fmt.Sprintf("%s-x%d", n.agent.opts.NodeName, i), "", netConf("net1", n.socket, extra))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						ip := firstIP(t, out)
						if ok[ip] {
							t.Errorf("%s handed out twice", ip)
						}
						ok[ip] = true
					case codeOf(err) == ipamplugin.CodePoolExhausted:
						full++
					default:
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
		if len(ok) != 14 || full != 6 {
			t.Fatalf("%d ADDs succeeded and %d got code 100, want 14 and 6", len(ok), full)
		}
		_, err := sh.call("ADD", "late", "", netConf("net1", na.socket, extra))
		wantCode(t, err, ipamplugin.CodePoolExhausted, "no free address in IPPool 10.71.0.0-28 (window 10.71.0.1-10.71.0.14, capacity 14)")
		_, err = sh.call("STATUS", "", "", netConf("net1", nb.socket, extra))
		wantCode(t, err, types.ErrPluginNotAvailable, "plugin not available: pool exhausted")
	})

	t.Run("requested static addresses", func(t *testing.T) {
		extra := `,"range":"10.72.0.0/24"`
		withIP := func(ip string) []byte {
			return []byte(strings.Replace(string(netConf("net1", na.socket, extra)), `"ipam"`, `"runtimeConfig":{"ips":["`+ip+`"]},"ipam"`, 1))
		}
		if ip := sh.addIP(t, "s1", withIP("10.72.0.50/24")); ip != "10.72.0.50" {
			t.Errorf("static ADD got %s", ip)
		}
		_, err := sh.call("ADD", "s2", "", withIP("10.72.0.50"))
		wantCode(t, err, ipamplugin.CodeAddressInUse, "10.72.0.50 in pool 10.72.0.0-24 is held by s1/net1")
		_, err = sh.call("ADD", "s3", "", withIP("10.72.0.0"))
		wantCode(t, err, ipamplugin.CodeAddressNotAllowed, "10.72.0.0 is the network or broadcast address")
		_, err = sh.call("ADD", "s4", "", withIP("10.99.0.1"))
		wantCode(t, err, types.ErrInvalidNetworkConfig, `requested IP "10.99.0.1": is not inside any range`)
	})

	t.Run("a referenced pool refuses a namespace it does not admit", func(t *testing.T) {
		ctx := context.Background()
		for _, obj := range []client.Object{
			&ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ops-green"}, Spec: ipamv1.IPPoolSpec{Range: "10.73.0.0/24",
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "green"}}}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "green", Labels: map[string]string{"team": "green"}}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "grey"}},
		} {
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
		ref := netConf("net-ref", na.socket, `,"pool":"ops-green"`)
		out, err := sh.call("ADD", "g1", "K8S_POD_NAMESPACE=green;K8S_POD_NAME=a", ref)
		if err != nil || firstIP(t, out) != "10.73.0.1" {
			t.Errorf("ADD in an admitted namespace = %s, %v", out, err)
		}
		_, err = sh.call("ADD", "g2", "K8S_POD_NAMESPACE=grey;K8S_POD_NAME=b", ref)
		wantCode(t, err, types.ErrInvalidNetworkConfig, `pool "ops-green": IPPool ops-green does not admit namespace grey: its namespaceSelector is "team=green"`)
	})

	t.Run("the agent serves datastore kubernetes only", func(t *testing.T) {
		resp := na.agent.Handle(context.Background(), &agentproto.Request{Verb: "ADD", ContainerID: "b1", IfName: "net1",
			Stdin: []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"netpool","range":"10.74.0.0/24","bbolt":{"path":"/tmp/x.db"}}}`)})
		if resp.Error == nil || resp.Error.Code != types.ErrInvalidNetworkConfig || !strings.Contains(resp.Error.Msg, `datastore "bbolt": the netpool agent serves datastore "kubernetes" only`) {
			t.Errorf("response = %+v", resp)
		}
		resp = na.agent.Handle(context.Background(), &agentproto.Request{Verb: "VERSION", Stdin: []byte("{}")})
		if resp.Error == nil || resp.Error.Code != types.ErrInternal {
			t.Errorf("unknown verb: response = %+v", resp)
		}
	})

	t.Run("metrics and health", func(t *testing.T) {
		body := httpGet(t, "http://"+metricsAddr+"/metrics")
		for _, want := range []string{`netpool_agent_requests_total{code="0",verb="ADD"}`, `netpool_agent_requests_total{code="100",verb="ADD"}`,
			"netpool_agent_request_duration_seconds_bucket", "rest_client_requests_total"} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		if got := httpGet(t, "http://"+metricsAddr+"/readyz"); got != "ok" {
			t.Errorf("readyz = %q", got)
		}
		if got := httpGet(t, "http://"+metricsAddr+"/healthz"); got != "ok" {
			t.Errorf("healthz = %q", got)
		}
	})
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestAgentDown runs the real plugin binary with no agent behind the socket: every verb fails at
// once with CNI error 11 naming the socket, and STATUS says ADD cannot succeed (50).
func TestAgentDown(t *testing.T) {
	bin := buildPlugin(t)
	socket := filepath.Join(socketDir(t), "agent.sock")
	for _, verb := range []string{"ADD", "DEL", "CHECK", "GC", "STATUS"} {
		start := time.Now()
		cmd := exec.Command(bin)
		cmd.Env = []string{"CNI_COMMAND=" + verb, "CNI_CONTAINERID=c1", "CNI_NETNS=/var/run/netns/c1", "CNI_IFNAME=net1", "CNI_PATH=/opt/cni/bin"}
		cmd.Stdin = strings.NewReader(string(netConf("net1", socket, `,"range":"10.75.0.0/24"`)))
		out, err := cmd.Output()
		if err == nil {
			t.Fatalf("%s succeeded: %s", verb, out)
		}
		code, msg := 11, `"msg": "netpool agent not reachable at `+socket+`: dial unix `+socket
		if verb == "STATUS" {
			code, msg = 50, `"msg": "plugin not available: netpool agent not reachable at `+socket
		}
		if !strings.Contains(string(out), fmt.Sprintf(`"code": %d`, code)) || !strings.Contains(string(out), msg) {
			t.Errorf("%s printed %s", verb, out)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s took %v with the agent down", verb, d)
		}
	}
}

// buildPlugin builds cmd/netpool into the test's temporary directory.
func buildPlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "netpool")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/netpool/netpool/cmd/netpool")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	return bin
}
