package egressrouter

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/netpool/netpool/cni-plugin/egressrouter"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
)

// desiredOf is newEgressDesired with the router's own mode, as a reconcile computes it.
func desiredOf(r *networkv1.EgressRouter, addresses []networkv1.EgressRouterAddress, image string) (*egressDesired, error) {
	mode, err := modeOf(r)
	if err != nil {
		return nil, err
	}
	return newEgressDesired(r, mode, addresses, image)
}

// TestEgressNADConfigRoundTrip joins the two halves without root: the NAD config the reconciler
// writes for a router, read by the egress-router plugin's own Parse, is that router (its macvlan,
// addresses, every rule with its target port, the fallback and its MAC seed).
func TestEgressNADConfigRoundTrip(t *testing.T) {
	r := statusRouter()
	d, err := desiredOf(r, r.Spec.Addresses, "img")
	if err != nil {
		t.Fatal(err)
	}
	got, err := egressrouter.Parse([]byte(d.nadConfig))
	if err != nil {
		t.Fatalf("the plugin refuses the reconciler's config %s: %v", d.nadConfig, err)
	}
	if got.Name != r.Name || got.Master != "ens4" || got.MacvlanMode != "vepa" || got.ClusterInterface != "eth0" || len(got.MAC) != 6 {
		t.Errorf("router %+v, want %s on master ens4 in vepa mode from eth0, with a seeded MAC", got, r.Name)
	}
	wantAddrs := []egressrouter.Address{
		{Prefix: netip.MustParsePrefix("192.168.12.99/24"), Gateway: netip.MustParseAddr("192.168.12.1")},
		{Prefix: netip.MustParsePrefix("fd00:12::99/64"), Gateway: netip.MustParseAddr("fd00:12::1")},
	}
	if !slices.Equal(got.Addresses, wantAddrs) {
		t.Errorf("addresses %v, want %v", got.Addresses, wantAddrs)
	}
	rd, ok := got.Mode.(*egressrouter.Redirect)
	if !ok {
		t.Fatalf("mode %T, want Redirect", got.Mode)
	}
	wantRules := []egressrouter.Rule{
		{Destination: netip.MustParseAddr("203.0.113.26"), Port: 8080, Protocol: "TCP", TargetPort: 80},
		{Destination: netip.MustParseAddr("2001:db8::26"), Port: 53, Protocol: "SCTP", TargetPort: 53},
	}
	if !slices.Equal(rd.Rules, wantRules) || rd.Fallback != netip.MustParseAddr("203.0.113.30") {
		t.Errorf("rules %v fallback %v, want %v and 203.0.113.30", rd.Rules, rd.Fallback, wantRules)
	}
	// A fallback-only router: no rules, and the plugin still reads it.
	r.Spec.Redirect.RedirectRules = nil
	d, err = desiredOf(r, r.Spec.Addresses, "img")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := egressrouter.Parse([]byte(d.nadConfig)); err != nil || len(got.Mode.(*egressrouter.Redirect).Rules) != 0 {
		t.Errorf("fallback-only config %s: %+v, %v", d.nadConfig, got, err)
	}
}

// TestEgressConfigHashUnchangedByUpgrade pins the config hash of a router as releases before the
// shared NAD type computed it: a changed hash would replace every router pod on upgrade.
func TestEgressConfigHashUnchangedByUpgrade(t *testing.T) {
	r := statusRouter()
	d, err := desiredOf(r, r.Spec.Addresses, "img")
	if err != nil {
		t.Fatal(err)
	}
	if d.hash != "bcb653447a908c53" {
		t.Errorf("config hash %s, want bcb653447a908c53 (the previous release's for this router)", d.hash)
	}
}

// TestEgressModeDecidesTheService: Redirect gives one port per rule, headless only with a fallback
// alone, and a mode the controller does not implement is an UnsupportedMode problem, never some
// default Service.
func TestEgressModeDecidesTheService(t *testing.T) {
	r := statusRouter()
	d, err := desiredOf(r, r.Spec.Addresses, "img")
	if err != nil {
		t.Fatal(err)
	}
	if d.headless() || len(d.servicePorts()) != 2 || d.servicePorts()[1].Protocol != corev1.ProtocolSCTP {
		t.Errorf("Redirect with two rules: headless %v, ports %v", d.headless(), d.servicePorts())
	}
	r.Spec.Redirect.RedirectRules = nil
	if d, _ = desiredOf(r, r.Spec.Addresses, "img"); !d.headless() {
		t.Errorf("Redirect with only a fallback: ports %v, want headless", d.servicePorts())
	}
	r.Spec.Mode = "HTTPProxy"
	_, err = desiredOf(r, r.Spec.Addresses, "img")
	var p *egressProblem
	if !errors.As(err, &p) || p.reason != networkv1.ReasonUnsupportedMode {
		t.Fatalf("mode HTTPProxy: %v, want an UnsupportedMode problem", err)
	}
	t.Logf("mode HTTPProxy: %v", err)
}

// TestEgressPodCarriesOpenShiftsLabel: Pod X has app: egress-router-cni, which OpenShift's Service
// selects by, and Service X still selects by the router label alone.
func TestEgressPodCarriesOpenShiftsLabel(t *testing.T) {
	r := statusRouter()
	d, err := desiredOf(r, r.Spec.Addresses, "img")
	if err != nil {
		t.Fatal(err)
	}
	pod, err := d.newPod()
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels["app"] != "egress-router-cni" || pod.Labels[networkv1.RouterLabel] != "er" {
		t.Errorf("pod labels %v, want app: egress-router-cni and the router label", pod.Labels)
	}
	if sel := d.service().Spec.Selector; len(sel) != 1 || sel[networkv1.RouterLabel] != "er" {
		t.Errorf("Service selector %v, want the router label alone", sel)
	}
}
