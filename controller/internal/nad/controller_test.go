package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// conflist is a NAD config: a macvlan plugin with netpool IPAM (ipam is the section's JSON),
// followed by a tuning plugin, as NADs chain them.
func conflist(ipam string) string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"blue","plugins":[
		{"type":"macvlan","master":"eth0","ipam":%s},
		{"type":"tuning","sysctl":{"net.ipv4.conf.IFNAME.arp_notify":"1"}}]}`, ipam)
}

func TestNADWithABadIPAMConfigGetsAWarningEventAndNoPool(t *testing.T) {
	f := newFixture(t, nil)
	mustStartManager(t, nil, testOptions())
	bad := f.nad("bad", conflist(`{"type":"netpool","datastore":"kubernetes","range":"10.40.0.0/33"}`))
	good := f.nad("good", conflist(`{"type":"netpool","datastore":"kubernetes","range":"10.41.0.0/24"}`))

	eventually(t, 5*time.Second, "the bad NAD gets a Warning naming the path, field and value", func() error {
		return wantEvent(t, bad.UID, corev1.EventTypeWarning, EventInvalidIPAMConfig,
			"plugins[0].ipam", `range "10.40.0.0/33"`, "not a CIDR")
	})
	eventually(t, 5*time.Second, "the good NAD's pool is created", exists(&ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "10.41.0.0-24"}}))
	var pools ipamv1.IPPoolList
	if err := direct.List(context.Background(), &pools); err != nil {
		t.Fatal(err)
	}
	if len(pools.Items) != 1 {
		t.Fatalf("%d pools exist, want only the good NAD's", len(pools.Items))
	}
	if notes := eventsFor(t, good.UID, corev1.EventTypeWarning, EventInvalidIPAMConfig); len(notes) != 0 {
		t.Errorf("the good NAD got warnings: %q", notes)
	}
}

func TestNADInlineRangeCreatesItsPool(t *testing.T) {
	f := newFixture(t, nil)
	mustStartManager(t, nil, testOptions())
	nad := f.nad("inline", conflist(`{"type":"netpool","kubernetes":{"kubeconfig":"/etc/cni/net.d/netpool.d/netpool.kubeconfig"},
		"network_name":"blue","range":"10.42.0.0/24","range_start":"10.42.0.10","exclude":["10.42.0.16/28","10.42.0.200"],"gateway":"10.42.0.1"}`))
	// A NAD on the embedded store keeps its state on nodes: no pool.
	f.nad("embedded", conflist(`{"type":"netpool","range":"10.43.0.0/24"}`))

	want := ipamv1.IPPoolSpec{
		Range: "10.42.0.0/24", RangeStart: "10.42.0.10", Gateway: "10.42.0.1", NetworkName: "blue",
		Exclude: []string{"10.42.0.16/28", "10.42.0.200"},
	}
	pool := &ipamv1.IPPool{}
	eventually(t, 5*time.Second, "the derived pool is created", func() error {
		if err := direct.Get(context.Background(), client.ObjectKey{Name: "blue-10.42.0.0-24"}, pool); err != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(pool.Spec, want) {
			return fmt.Errorf("spec %+v, want %+v", pool.Spec, want)
		}
		return nil
	})
	eventually(t, 5*time.Second, "the creation is an Event on the NAD", func() error {
		return wantEvent(t, nad.UID, corev1.EventTypeNormal, EventPoolCreated, "blue-10.42.0.0-24", "plugins[0].ipam")
	})
	consistently(t, time.Second, "no pool for the embedded store", gone(&ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "10.43.0.0-24"}}))

	// A deleted pool that a NAD still uses is made again.
	if err := direct.Delete(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the deleted pool is made again", func() error {
		p := &ipamv1.IPPool{}
		if err := direct.Get(context.Background(), client.ObjectKey{Name: "blue-10.42.0.0-24"}, p); err != nil {
			return err
		}
		if p.UID == pool.UID {
			return fmt.Errorf("still the old pool")
		}
		return nil
	})
}

func TestNADReferencingAPoolIsCheckedAgainstItsNamespaceSelector(t *testing.T) {
	f := newFixture(t, map[string]string{"team": "red"})
	shared := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Spec: ipamv1.IPPoolSpec{Range: "10.44.0.0/24", NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"team": "blue"},
		}},
	}
	f.create(shared)
	open := f.pool("open", "10.45.0.0/24", "")
	mustStartManager(t, nil, testOptions())

	refused := f.nad("refused", conflist(`{"type":"netpool","datastore":"kubernetes","pool":"shared"}`))
	admitted := f.nad("admitted", conflist(`{"type":"netpool","datastore":"kubernetes","pool":"`+open.Name+`"}`))
	missing := f.nad("missing", conflist(`{"type":"netpool","datastore":"kubernetes","pool":"nowhere"}`))

	eventually(t, 5*time.Second, "the NAD its pool does not admit gets a Warning", func() error {
		return wantEvent(t, refused.UID, corev1.EventTypeWarning, EventPoolUnusable,
			"IPPool shared does not admit namespace "+f.ns, "team=blue")
	})
	eventually(t, 5*time.Second, "the NAD of a missing pool gets a Warning", func() error {
		return wantEvent(t, missing.UID, corev1.EventTypeWarning, EventPoolUnusable, `pool "nowhere": no IPPool of that name`)
	})
	consistently(t, time.Second, "the admitted NAD gets no Warning", func() error {
		if notes := eventsFor(t, admitted.UID, corev1.EventTypeWarning, EventPoolUnusable); len(notes) != 0 {
			return fmt.Errorf("warnings: %q", notes)
		}
		return nil
	})
}
