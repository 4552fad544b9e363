package egressrouter

import (
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkv1 "github.com/netpool/netpool/crds/network/v1"
)

// The EgressRouter's conditions and children as pure functions of what a reconcile observed.

func statusRouter() *networkv1.EgressRouter {
	return &networkv1.EgressRouter{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "er", Generation: 3, UID: "uid-1"},
		Spec: networkv1.EgressRouterSpec{
			Mode:      networkv1.EgressRouterModeRedirect,
			Addresses: []networkv1.EgressRouterAddress{{IP: "192.168.12.99/24", Gateway: "192.168.12.1"}, {IP: "fd00:12::99/64", Gateway: "fd00:12::1"}},
			Redirect: &networkv1.RedirectConfig{RedirectRules: []networkv1.L4RedirectRule{
				{DestinationIP: "203.0.113.26", Port: 8080, TargetPort: 80, Protocol: networkv1.ProtocolTypeTCP},
				{DestinationIP: "2001:db8::26", Port: 53, Protocol: networkv1.ProtocolTypeSCTP},
			}, FallbackIP: "203.0.113.30"},
			NetworkInterface: networkv1.EgressRouterInterface{Macvlan: networkv1.MacvlanConfig{Mode: networkv1.MacvlanModeVEPA, Master: "ens4"}},
		},
	}
}

func readyPod(networkStatus string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "er", Annotations: map[string]string{}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	if networkStatus != "" {
		p.Annotations[nadv1.NetworkStatusAnnot] = networkStatus
	}
	return p
}

const bothOnNet1 = `[{"name":"cluster","interface":"eth0","ips":["10.244.0.5"],"default":true},` +
	`{"name":"ns/er","interface":"net1","ips":["192.168.12.99","fd00:12::99"]}]`

func TestSetEgressConditions(t *testing.T) {
	r := statusRouter()
	notReady := readyPod(bothOnNet1)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	tests := []struct {
		name                             string
		obs                              egressObservation
		prevDegraded                     *metav1.Condition
		available, progressing, degraded string // "Status/Reason"
		wantAvailableMessage             string
	}{
		{name: "no pod yet", obs: egressObservation{},
			available: "False/PodNotReady", progressing: "True/CreatingPod", degraded: "False/AsExpected"},
		{name: "pod not Ready", obs: egressObservation{pod: notReady},
			available: "False/PodNotReady", progressing: "True/CreatingPod", degraded: "False/AsExpected"},
		{name: "Ready, both addresses on net1", obs: egressObservation{pod: readyPod(bothOnNet1), addresses: r.Spec.Addresses},
			available: "True/RouterReady", progressing: "False/AsExpected", degraded: "False/AsExpected",
			wantAvailableMessage: "pod er is Ready with 192.168.12.99/24, fd00:12::99/64 on net1"},
		{name: "Ready, the IPv6 address missing", obs: egressObservation{addresses: r.Spec.Addresses,
			pod: readyPod(`[{"name":"ns/er","interface":"net1","ips":["192.168.12.99"]}]`)},
			available: "False/AddressNotAttached", progressing: "True/CreatingPod", degraded: "False/AsExpected",
			wantAvailableMessage: "the network-status of pod er does not show fd00:12::99/64 on net1"},
		{name: "Ready, the address on another interface", obs: egressObservation{addresses: r.Spec.Addresses,
			pod: readyPod(`[{"name":"ns/er","interface":"net2","ips":["192.168.12.99","fd00:12::99"]}]`)},
			available: "False/AddressNotAttached", progressing: "True/CreatingPod", degraded: "False/AsExpected",
			wantAvailableMessage: "the network-status of pod er has no interface net1 of network ns/er"},
		{name: "Ready, another network on net1", obs: egressObservation{addresses: r.Spec.Addresses,
			pod: readyPod(`[{"name":"ns/other","interface":"net1","ips":["192.168.12.99","fd00:12::99"]}]`)},
			available: "False/AddressNotAttached", progressing: "True/CreatingPod", degraded: "False/AsExpected"},
		{name: "Ready, no network-status", obs: egressObservation{addresses: r.Spec.Addresses, pod: readyPod("")},
			available: "False/AddressNotAttached", progressing: "True/CreatingPod", degraded: "False/AsExpected",
			wantAvailableMessage: "pod er has no k8s.v1.cni.cncf.io/network-status annotation yet"},
		{name: "Ready, a malformed network-status", obs: egressObservation{addresses: r.Spec.Addresses, pod: readyPod(`{"not":"a list"}`)},
			available: "False/AddressNotAttached", progressing: "True/CreatingPod", degraded: "False/AsExpected",
			wantAvailableMessage: "annotation k8s.v1.cni.cncf.io/network-status of pod er is not a list of network statuses"},
		{name: "replacing", obs: egressObservation{replacing: true},
			available: "False/PodNotReady", progressing: "True/ReplacingPod", degraded: "False/AsExpected"},
		{name: "a name conflict", obs: egressObservation{problem: &egressProblem{networkv1.ReasonNameConflict, "Service ns/er exists"}},
			available: "False/NameConflict", progressing: "False/NameConflict", degraded: "True/NameConflict"},
		{name: "a pool problem while an older pod still works", obs: egressObservation{
			problem: &egressProblem{networkv1.ReasonAddressInUse, "held"}, pod: readyPod(bothOnNet1), addresses: r.Spec.Addresses},
			available: "True/RouterReady", progressing: "False/AddressInUse", degraded: "True/AddressInUse"},
		{name: "a failed pod", obs: egressObservation{replacing: true, podFailed: true},
			available: "False/PodNotReady", progressing: "True/ReplacingPod", degraded: "True/PodFailed"},
		{name: "a failure is kept until the replacement is Available", obs: egressObservation{pod: notReady},
			prevDegraded: &metav1.Condition{Type: networkv1.EgressRouterDegraded, Status: metav1.ConditionTrue, Reason: networkv1.ReasonPodFailed, Message: "pod er failed; it is replaced"},
			available:    "False/PodNotReady", progressing: "True/CreatingPod", degraded: "True/PodFailed"},
		{name: "and cleared once it is", obs: egressObservation{pod: readyPod(bothOnNet1), addresses: r.Spec.Addresses},
			prevDegraded: &metav1.Condition{Type: networkv1.EgressRouterDegraded, Status: metav1.ConditionTrue, Reason: networkv1.ReasonPodFailed, Message: "pod er failed; it is replaced"},
			available:    "True/RouterReady", progressing: "False/AsExpected", degraded: "False/AsExpected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := statusRouter()
			if tt.prevDegraded != nil {
				r.Status.Conditions = []metav1.Condition{*tt.prevDegraded}
			}
			setEgressConditions(r, tt.obs)
			for typ, want := range map[string]string{
				networkv1.EgressRouterAvailable: tt.available, networkv1.EgressRouterProgressing: tt.progressing, networkv1.EgressRouterDegraded: tt.degraded,
			} {
				c := meta.FindStatusCondition(r.Status.Conditions, typ)
				if c == nil {
					t.Fatalf("no %s condition", typ)
				}
				if got := string(c.Status) + "/" + c.Reason; got != want {
					t.Errorf("%s = %s (%s), want %s", typ, got, c.Message, want)
				}
				if c.ObservedGeneration != 3 {
					t.Errorf("%s observedGeneration %d, want 3", typ, c.ObservedGeneration)
				}
			}
			if tt.wantAvailableMessage != "" {
				if c := meta.FindStatusCondition(r.Status.Conditions, networkv1.EgressRouterAvailable); !strings.Contains(c.Message, tt.wantAvailableMessage) {
					t.Errorf("Available message %q, want %q", c.Message, tt.wantAvailableMessage)
				}
			}
			if r.Status.ObservedGeneration != 3 {
				t.Errorf("status.observedGeneration %d, want 3", r.Status.ObservedGeneration)
			}
		})
	}
}

func TestEgressNADConfigFollowsTheContract(t *testing.T) {
	d, err := desiredOf(statusRouter(), statusRouter().Spec.Addresses, "example.com/pause:1")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cniVersion":"1.1.0","name":"er","type":"netpool-egress-router",` +
		`"interface":{"type":"macvlan","master":"ens4","mode":"vepa","mtu":0},"clusterInterface":"eth0",` +
		`"addresses":[{"ip":"192.168.12.99/24","gateway":"192.168.12.1"},{"ip":"fd00:12::99/64","gateway":"fd00:12::1"}],` +
		`"redirect":{"rules":[{"destinationIP":"203.0.113.26","port":8080,"protocol":"TCP","targetPort":80},` +
		`{"destinationIP":"2001:db8::26","port":53,"protocol":"SCTP","targetPort":53}],"fallbackIP":"203.0.113.30"},` +
		`"macSeed":"ns/er"}`
	if d.nadConfig != want {
		t.Errorf("NAD config\n got %s\nwant %s", d.nadConfig, want)
	}
	if d.networks != `[{"name":"er","namespace":"ns","interface":"net1"}]` {
		t.Errorf("networks annotation %s", d.networks)
	}
	for _, mode := range []networkv1.MacvlanMode{networkv1.MacvlanModeBridge, networkv1.MacvlanModePrivate, networkv1.MacvlanModePassthru, ""} {
		r := statusRouter()
		r.Spec.NetworkInterface.Macvlan.Mode = mode
		d, err := desiredOf(r, r.Spec.Addresses, "i")
		if err != nil {
			t.Fatal(err)
		}
		wantMode := map[networkv1.MacvlanMode]string{"Bridge": "bridge", "Private": "private", "Passthru": "passthru", "": "bridge"}[mode]
		if !strings.Contains(d.nadConfig, `"mode":"`+wantMode+`"`) {
			t.Errorf("macvlan mode %q: config %s", mode, d.nadConfig)
		}
	}
}

func TestEgressConfigHashCoversEveryInput(t *testing.T) {
	base, err := desiredOf(statusRouter(), statusRouter().Spec.Addresses, "img")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := desiredOf(statusRouter(), statusRouter().Spec.Addresses, "img")
	if again.hash != base.hash {
		t.Fatalf("the hash is not stable: %s, %s", base.hash, again.hash)
	}
	changes := map[string]func(r *networkv1.EgressRouter) (string, []networkv1.EgressRouterAddress){
		"a rule": func(r *networkv1.EgressRouter) (string, []networkv1.EgressRouterAddress) {
			r.Spec.Redirect.RedirectRules[0].Port = 1
			return "img", r.Spec.Addresses
		},
		"the fallback": func(r *networkv1.EgressRouter) (string, []networkv1.EgressRouterAddress) {
			r.Spec.Redirect.FallbackIP = ""
			return "img", r.Spec.Addresses
		},
		"the master": func(r *networkv1.EgressRouter) (string, []networkv1.EgressRouterAddress) {
			r.Spec.NetworkInterface.Macvlan.Master = ""
			return "img", r.Spec.Addresses
		},
		"the addresses": func(r *networkv1.EgressRouter) (string, []networkv1.EgressRouterAddress) {
			return "img", r.Spec.Addresses[:1]
		},
		"the image": func(r *networkv1.EgressRouter) (string, []networkv1.EgressRouterAddress) {
			return "img2", r.Spec.Addresses
		},
		"node selection": func(r *networkv1.EgressRouter) (string, []networkv1.EgressRouterAddress) {
			r.Spec.NodeSelector = map[string]string{"a": "b"}
			return "img", r.Spec.Addresses
		},
	}
	for what, change := range changes {
		r := statusRouter()
		image, addrs := change(r)
		d, err := desiredOf(r, addrs, image)
		if err != nil {
			t.Fatal(err)
		}
		if d.hash == base.hash {
			t.Errorf("changing %s keeps the config hash", what)
		}
	}
}

// FuzzAttachedMessage feeds arbitrary network-status annotations to the Available check: it must
// never panic, and only a status listing both addresses on net1 of ns/er may pass.
func FuzzAttachedMessage(f *testing.F) {
	f.Add(bothOnNet1)
	f.Add(`[{"name":"ns/er","interface":"net1","ips":["192.168.12.99/24","fd00:12::99%eth0"]}]`)
	f.Add(`[{"name":"er","interface":"net1","ips":[""]}]`)
	f.Add(`null`)
	f.Add(`[{}]`)
	f.Add(`{"name":1}`)
	r := statusRouter()
	f.Fuzz(func(t *testing.T, status string) {
		msg := attachedMessage(readyPod(status), r, r.Spec.Addresses)
		if msg == "" && (!strings.Contains(status, "net1") || !strings.Contains(status, "er")) {
			t.Fatalf("%q passed the Available check", status)
		}
	})
}
