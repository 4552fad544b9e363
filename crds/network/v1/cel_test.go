package v1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/internal/scheme"
	"github.com/netpool/netpool/test/envtest"
)

// These tests run every validation rule of the EgressRouter CRD (OpenAPI bounds, enums, defaults
// and CEL rules) against a real kube-apiserver: each case mutates a valid router before Create and
// lists the substrings the apiserver's error must contain; no substrings means it must be accepted.

var seq atomic.Int64

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, seq.Add(1))
}

func validRouter() *networkv1.EgressRouter {
	return &networkv1.EgressRouter{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: uniqueName("router")},
		Spec: networkv1.EgressRouterSpec{
			Mode:             networkv1.EgressRouterModeRedirect,
			NetworkInterface: networkv1.EgressRouterInterface{Macvlan: networkv1.MacvlanConfig{Mode: networkv1.MacvlanModeBridge}},
			Addresses:        []networkv1.EgressRouterAddress{{IP: "192.168.12.99/24", Gateway: "192.168.12.1"}},
			Redirect: &networkv1.RedirectConfig{RedirectRules: []networkv1.L4RedirectRule{
				{DestinationIP: "10.0.0.99", Port: 80, Protocol: networkv1.ProtocolTypeUDP},
				{DestinationIP: "203.0.113.26", Port: 8080, TargetPort: 80, Protocol: networkv1.ProtocolTypeTCP},
			}},
		},
	}
}

func newClient(t *testing.T, env *envtest.Env) client.Client {
	t.Helper()
	kinds, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: kinds})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkErr fails unless err is an Invalid error containing every one of want, or nil when want is empty.
func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("got error %v, want the object accepted", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("object accepted, want an error containing %q", want)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want an Invalid error", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not contain %q", err, w)
		}
	}
}

func rules(n int) []networkv1.L4RedirectRule {
	out := make([]networkv1.L4RedirectRule, n)
	for i := range out {
		out[i] = networkv1.L4RedirectRule{DestinationIP: "10.0.0.1", Port: int32(1000 + i), Protocol: networkv1.ProtocolTypeTCP}
	}
	return out
}

func TestCEL(t *testing.T) {
	env := envtest.Start(t)
	c := newClient(t, env)
	ctx := context.Background()
	tests := []struct {
		name   string
		mutate func(r *networkv1.EgressRouter)
		want   []string
		absent []string // substrings the error must not contain
	}{
		{name: "valid", mutate: func(*networkv1.EgressRouter) {}},
		{name: "a name that cannot name a Service", mutate: func(r *networkv1.EgressRouter) { r.Name = "1" + r.Name },
			want: []string{"the name must be a DNS-1035 label"}},
		{name: "a name with a dot", mutate: func(r *networkv1.EgressRouter) { r.Name = "a." + r.Name },
			want: []string{"the name must be a DNS-1035 label"}},
		{name: "an unknown mode", mutate: func(r *networkv1.EgressRouter) { r.Spec.Mode = "Proxy" },
			want: []string{`spec.mode: Unsupported value: "Proxy"`}},
		// OpenShift SDN's other modes: the error says which mode is supported, and nothing about length.
		{name: "mode HTTPProxy", mutate: func(r *networkv1.EgressRouter) { r.Spec.Mode = "HTTPProxy" },
			want: []string{`spec.mode: Unsupported value: "HTTPProxy": supported values: "Redirect"`}, absent: []string{"Too long"}},
		{name: "mode DNSProxy", mutate: func(r *networkv1.EgressRouter) { r.Spec.Mode = "DNSProxy" },
			want: []string{`supported values: "Redirect"`}, absent: []string{"Too long"}},
		{name: "a long macvlan mode", mutate: func(r *networkv1.EgressRouter) { r.Spec.NetworkInterface.Macvlan.Mode = "Passthrough" },
			want: []string{`spec.networkInterface.macvlan.mode: Unsupported value: "Passthrough"`}, absent: []string{"Too long"}},
		{name: "a long protocol", mutate: func(r *networkv1.EgressRouter) { r.Spec.Redirect.RedirectRules[0].Protocol = "ICMPv6" },
			want: []string{`Unsupported value: "ICMPv6": supported values: "TCP", "UDP", "SCTP"`}, absent: []string{"Too long"}},
		{name: "Passthru without a master", mutate: func(r *networkv1.EgressRouter) {
			r.Spec.NetworkInterface.Macvlan.Mode = networkv1.MacvlanModePassthru
		}, want: []string{"master is required with mode Passthru"}},
		{name: "Passthru with a master", mutate: func(r *networkv1.EgressRouter) {
			r.Spec.NetworkInterface.Macvlan = networkv1.MacvlanConfig{Mode: networkv1.MacvlanModePassthru, Master: "ens5"}
		}},
		{name: "Redirect without redirect", mutate: func(r *networkv1.EgressRouter) { r.Spec.Redirect = nil },
			want: []string{"redirect is required when mode is Redirect"}},
		{name: "redirect without rules or fallback", mutate: func(r *networkv1.EgressRouter) { r.Spec.Redirect = &networkv1.RedirectConfig{} },
			want: []string{"redirect needs at least one redirectRule or a fallbackIP"}},
		{name: "a fallback only", mutate: func(r *networkv1.EgressRouter) {
			r.Spec.Redirect = &networkv1.RedirectConfig{FallbackIP: "203.0.113.30"}
		}},
		{name: "no address and no pool", mutate: func(r *networkv1.EgressRouter) { r.Spec.Addresses = nil },
			want: []string{"at least one address is required, unless pool is set to allocate one"}},
		{name: "no address with a pool", mutate: func(r *networkv1.EgressRouter) { r.Spec.Addresses, r.Spec.Pool = nil, "egress" }},
		{name: "an invalid pool name", mutate: func(r *networkv1.EgressRouter) { r.Spec.Pool = "Egress_Pool" },
			want: []string{"spec.pool: Invalid value"}},
		{name: "dual stack", mutate: func(r *networkv1.EgressRouter) {
			r.Spec.Addresses = append(r.Spec.Addresses, networkv1.EgressRouterAddress{IP: "fd00:12::99/64", Gateway: "fd00:12::1"})
			r.Spec.Redirect.RedirectRules = append(r.Spec.Redirect.RedirectRules,
				networkv1.L4RedirectRule{DestinationIP: "2001:db8::26", Port: 8080, Protocol: networkv1.ProtocolTypeSCTP})
			r.Spec.Redirect.FallbackIP = "2001:db8::30"
		}},
		{name: "two IPv4 addresses", mutate: func(r *networkv1.EgressRouter) {
			r.Spec.Addresses = append(r.Spec.Addresses, networkv1.EgressRouterAddress{IP: "192.168.13.99/24", Gateway: "192.168.13.1"})
		}, want: []string{"addresses may hold at most one IPv4 and one IPv6 address"}},
		{name: "three addresses", mutate: func(r *networkv1.EgressRouter) {
			a := r.Spec.Addresses[0]
			r.Spec.Addresses = append(r.Spec.Addresses, a, a)
		}, want: []string{"spec.addresses: Too many"}},
		{name: "an address without prefix length", mutate: func(r *networkv1.EgressRouter) { r.Spec.Addresses[0].IP = "192.168.12.99" },
			want: []string{"ip 192.168.12.99 must be an address with its prefix length"}},
		{name: "no gateway", mutate: func(r *networkv1.EgressRouter) { r.Spec.Addresses[0].Gateway = "" },
			want: []string{"gateway is required: the router sends through it"}},
		{name: "a gateway that is no IP", mutate: func(r *networkv1.EgressRouter) { r.Spec.Addresses[0].Gateway = "router.local" },
			want: []string{"gateway must be an IPv4 or IPv6 address"}},
		{name: "a gateway outside the subnet", mutate: func(r *networkv1.EgressRouter) { r.Spec.Addresses[0].Gateway = "192.168.13.1" },
			want: []string{"gateway 192.168.13.1 is not inside the subnet of 192.168.12.99/24"}},
		{name: "the gateway is the router address", mutate: func(r *networkv1.EgressRouter) { r.Spec.Addresses[0].Gateway = "192.168.12.99" },
			want: []string{"gateway 192.168.12.99 is the router address itself"}},
		{name: "a destination of another family", mutate: func(r *networkv1.EgressRouter) {
			r.Spec.Redirect.RedirectRules[0].DestinationIP = "2001:db8::99"
		}, want: []string{"every redirectRules destinationIP must have the IP family of one of the addresses"}},
		{name: "a fallback of another family", mutate: func(r *networkv1.EgressRouter) { r.Spec.Redirect.FallbackIP = "2001:db8::30" },
			want: []string{"fallbackIP must have the IP family of one of the addresses"}},
		{name: "a destination that is no IP", mutate: func(r *networkv1.EgressRouter) { r.Spec.Redirect.RedirectRules[0].DestinationIP = "db.example.com" },
			want: []string{"destinationIP must be an IPv4 or IPv6 address"}},
		{name: "a fallback that is no IP", mutate: func(r *networkv1.EgressRouter) { r.Spec.Redirect.FallbackIP = "10.0.0.300" },
			want: []string{"fallbackIP must be an IPv4 or IPv6 address"}},
		{name: "a repeated port and protocol", mutate: func(r *networkv1.EgressRouter) {
			r.Spec.Redirect.RedirectRules[1].Port, r.Spec.Redirect.RedirectRules[1].Protocol = 80, networkv1.ProtocolTypeUDP
		}, want: []string{"each (port, protocol) may appear in only one redirect rule"}},
		{name: "one port with two protocols", mutate: func(r *networkv1.EgressRouter) { r.Spec.Redirect.RedirectRules[1].Port = 80 }},
		{name: "64 rules", mutate: func(r *networkv1.EgressRouter) { r.Spec.Redirect.RedirectRules = rules(64) }},
		{name: "65 rules", mutate: func(r *networkv1.EgressRouter) { r.Spec.Redirect.RedirectRules = rules(65) },
			want: []string{"spec.redirect.redirectRules: Too many"}},
		{name: "port 0", mutate: func(r *networkv1.EgressRouter) { r.Spec.Redirect.RedirectRules[0].Port = 0 },
			want: []string{"spec.redirect.redirectRules[0].port: Invalid value: 0"}},
		{name: "port 65536", mutate: func(r *networkv1.EgressRouter) { r.Spec.Redirect.RedirectRules[0].Port = 65536 },
			want: []string{"spec.redirect.redirectRules[0].port: Invalid value: 65536"}},
		{name: "targetPort 65536", mutate: func(r *networkv1.EgressRouter) { r.Spec.Redirect.RedirectRules[0].TargetPort = 65536 },
			want: []string{"spec.redirect.redirectRules[0].targetPort: Invalid value: 65536"}},
		{name: "an unknown protocol", mutate: func(r *networkv1.EgressRouter) { r.Spec.Redirect.RedirectRules[0].Protocol = "ICMP" },
			want: []string{`spec.redirect.redirectRules[0].protocol: Unsupported value: "ICMP"`}},
		{name: "an unknown macvlan mode", mutate: func(r *networkv1.EgressRouter) { r.Spec.NetworkInterface.Macvlan.Mode = "Source" },
			want: []string{`spec.networkInterface.macvlan.mode: Unsupported value: "Source"`}},
		{name: "a master", mutate: func(r *networkv1.EgressRouter) { r.Spec.NetworkInterface.Macvlan.Master = "ens3.100" }},
		{name: "a master with a slash", mutate: func(r *networkv1.EgressRouter) { r.Spec.NetworkInterface.Macvlan.Master = "eth0/1" },
			want: []string{"master must be a network interface name"}},
		{name: "a master with a space", mutate: func(r *networkv1.EgressRouter) { r.Spec.NetworkInterface.Macvlan.Master = "eth 0" },
			want: []string{"master must be a network interface name"}},
		{name: "master ..", mutate: func(r *networkv1.EgressRouter) { r.Spec.NetworkInterface.Macvlan.Master = ".." },
			want: []string{"master must be a network interface name"}},
		{name: "a master of 16 characters", mutate: func(r *networkv1.EgressRouter) { r.Spec.NetworkInterface.Macvlan.Master = "abcdefghijklmnop" },
			want: []string{"spec.networkInterface.macvlan.master: Too long"}},
		{name: "too many node selector labels", mutate: func(r *networkv1.EgressRouter) {
			r.Spec.NodeSelector = map[string]string{}
			for i := range 33 {
				r.Spec.NodeSelector[fmt.Sprintf("l%d", i)] = "x"
			}
		}, want: []string{"spec.nodeSelector: Too many"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validRouter()
			tt.mutate(r)
			err := c.Create(ctx, r)
			checkErr(t, err, tt.want)
			for _, a := range tt.absent {
				if err != nil && strings.Contains(err.Error(), a) {
					t.Errorf("error %q contains %q", err, a)
				}
			}
			if err == nil {
				if err := c.Delete(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
		})
	}

	t.Run("defaults", func(t *testing.T) {
		r := validRouter()
		r.Spec.Mode, r.Spec.NetworkInterface = "", networkv1.EgressRouterInterface{}
		if err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Delete(ctx, r) }()
		if r.Spec.Mode != networkv1.EgressRouterModeRedirect || r.Spec.NetworkInterface.Macvlan.Mode != networkv1.MacvlanModeBridge {
			t.Fatalf("mode %q, macvlan mode %q: want the defaults Redirect and Bridge", r.Spec.Mode, r.Spec.NetworkInterface.Macvlan.Mode)
		}
	})

	t.Run("OpenShift's example", func(t *testing.T) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(readOpenShiftExample(t), &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetNamespace(corev1.NamespaceDefault)
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("OpenShift's example with apiVersion network.netpool.io/v1: %v", err)
		}
		defer func() { _ = c.Delete(ctx, u) }()
		r := &networkv1.EgressRouter{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), r); err != nil {
			t.Fatal(err)
		}
		if len(r.Spec.Redirect.RedirectRules) != 3 || r.Spec.Redirect.RedirectRules[2].TargetPort != 443 {
			t.Fatalf("rules %+v, want the example's three", r.Spec.Redirect.RedirectRules)
		}
	})
}

// readOpenShiftExample reads OpenShift's documented EgressRouter with only its apiVersion changed.
func readOpenShiftExample(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "openshift-example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
