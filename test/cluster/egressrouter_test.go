package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/test/cluster"
	"github.com/netpool/netpool/test/poll"
)

// openShiftRedirect is OpenShift's documented EgressRouter redirect example, only its apiVersion
// changed.
const openShiftRedirect = `apiVersion: network.netpool.io/v1
kind: EgressRouter
metadata:
  name: egress-router-redirect
spec:
  networkInterface: {
    macvlan: {
      mode: "Bridge"
    }
  }
  addresses: [
    {
      ip: "192.168.12.99/24",
      gateway: "192.168.12.1"
    }
  ]
  mode: Redirect
  redirect: {
    redirectRules: [
      {
        destinationIP: "10.0.0.99",
        port: 80,
        protocol: UDP
      },
      {
        destinationIP: "203.0.113.26",
        port: 8080,
        targetPort: 80,
        protocol: TCP
      },
      {
        destinationIP: "203.0.113.27",
        port: 8443,
        targetPort: 443,
        protocol: TCP
      }
    ]
  }
`

// TestEgressRouter: OpenShift's redirect example on the real cluster. The reconciler's pod starts
// through Multus with netpool-egress-router, the router turns Available, a client pod on the other
// node connects to the router's Service (through kube-proxy), and each destination, on the
// external bridge, sees the connection come from the router's address; a port no rule names is
// refused.
func TestEgressRouter(t *testing.T) {
	c := need(t)
	ctx := context.Background()
	cl := kubeClient(t, c)
	for i, port := range []int{80, 443} {
		serveAnswer(t, net.JoinHostPort(cluster.EgressDestinations[i], fmt.Sprint(port)))
	}
	ns := testNamespace(t, c, nil)
	objs, err := cluster.DecodeYAMLBytes([]byte(openShiftRedirect))
	if err != nil {
		t.Fatal(err)
	}
	objs[0].SetNamespace(ns)
	if err := c.Apply(ctx, objs); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: ns, Name: "egress-router-redirect"}
	poll.Eventually(t, 3*time.Minute, "the router Available", func() error {
		var r networkv1.EgressRouter
		if err := cl.Get(ctx, key, &r); err != nil {
			return err
		}
		for _, cd := range r.Status.Conditions {
			if cd.Type == string(networkv1.EgressRouterAvailable) && cd.Status == metav1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", r.Status.Conditions)
	})
	routerPod, err := c.Client.CoreV1().Pods(ns).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := secondaryAddr(t, routerPod, "net1"); got != "192.168.12.99" {
		t.Errorf("the router pod's net1 is %s, want 192.168.12.99", got)
	}
	svc, err := c.Client.CoreV1().Services(ns).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other := c.Nodes[0].Name
	if routerPod.Spec.NodeName == other {
		other = c.Nodes[len(c.Nodes)-1].Name
	}
	client := createRunning(t, c, serverPod(ns, "client", other, nil))
	for _, hop := range []struct{ port, dest string }{{"8080", cluster.EgressDestinations[0]}, {"8443", cluster.EgressDestinations[1]}} {
		var ans answer
		poll.Eventually(t, time.Minute, "the client reaches "+hop.dest+" through Service port "+hop.port, func() error {
			var err error
			ans, err = ask(client.Status.PodIP, net.JoinHostPort(svc.Spec.ClusterIP, hop.port))
			return err
		})
		if ans.Hostname != hop.dest {
			t.Errorf("Service port %s reached %s, want %s", hop.port, ans.Hostname, hop.dest)
		}
		if host, _, _ := net.SplitHostPort(ans.Remote); host != "192.168.12.99" {
			t.Errorf("%s saw the connection from %s, want the router's 192.168.12.99", hop.dest, ans.Remote)
		}
	}
	_, err = ask(client.Status.PodIP, net.JoinHostPort(routerPod.Status.PodIP, "9999"))
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a port no rule names: %v, want the connection refused", err)
	}
}

// serveAnswer serves, on addr of the host, what the test image answers, with the destination's
// address as its hostname, until t ends.
func serveAnswer(t *testing.T, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := net.SplitHostPort(addr)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(answer{Hostname: host, Remote: r.RemoteAddr})
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}
