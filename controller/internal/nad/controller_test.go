package nad

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/poll"
)

func TestNADWithABadIPAMConfigGetsAWarningEventAndNoPool(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	startManager(t, ctrltest.TestOptions())
	bad := f.NAD("bad", ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","range":"10.40.0.0/33"}`))
	good := f.NAD("good", ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","range":"10.41.0.0/24"}`))

	poll.Eventually(t, 5*time.Second, "the bad NAD gets a Warning naming the path, field and value", func() error {
		return f.WantEvent(bad.UID, corev1.EventTypeWarning, EventInvalidIPAMConfig,
			"plugins[0].ipam", `range "10.40.0.0/33"`, "not a CIDR")
	})
	poll.Eventually(t, 5*time.Second, "the good NAD's pool is created", f.Exists(&ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "10.41.0.0-24"}}))
	var pools ipamv1.IPPoolList
	if err := f.C.List(context.Background(), &pools); err != nil {
		t.Fatal(err)
	}
	if len(pools.Items) != 1 {
		t.Fatalf("%d pools exist, want only the good NAD's", len(pools.Items))
	}
	if notes := f.EventsFor(good.UID, corev1.EventTypeWarning, EventInvalidIPAMConfig); len(notes) != 0 {
		t.Errorf("the good NAD got warnings: %q", notes)
	}
}

func TestNADInlineRangeCreatesItsPool(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	startManager(t, ctrltest.TestOptions())
	nad := f.NAD("inline", ctrltest.Conflist(`{"type":"netpool","kubernetes":{"kubeconfig":"/etc/cni/net.d/netpool.d/netpool.kubeconfig"},
		"network_name":"blue","range":"10.42.0.0/24","range_start":"10.42.0.10","exclude":["10.42.0.16/28","10.42.0.200"],"gateway":"10.42.0.1"}`))
	// A NAD on the embedded store keeps its state on nodes: no pool.
	f.NAD("embedded", ctrltest.Conflist(`{"type":"netpool","range":"10.43.0.0/24"}`))

	want := ipamv1.IPPoolSpec{
		Range: "10.42.0.0/24", RangeStart: "10.42.0.10", Gateway: "10.42.0.1", NetworkName: "blue",
		Exclude: []string{"10.42.0.16/28", "10.42.0.200"},
	}
	pool := &ipamv1.IPPool{}
	poll.Eventually(t, 5*time.Second, "the derived pool is created", func() error {
		if err := f.C.Get(context.Background(), client.ObjectKey{Name: "blue-10.42.0.0-24"}, pool); err != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(pool.Spec, want) {
			return fmt.Errorf("spec %+v, want %+v", pool.Spec, want)
		}
		return nil
	})
	poll.Eventually(t, 5*time.Second, "the creation is an Event on the NAD", func() error {
		return f.WantEvent(nad.UID, corev1.EventTypeNormal, EventPoolCreated, "blue-10.42.0.0-24", "plugins[0].ipam")
	})
	poll.Consistently(t, time.Second, "no pool for the embedded store", f.Gone(&ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "10.43.0.0-24"}}))

	// A deleted pool that a NAD still uses is made again.
	if err := f.C.Delete(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 5*time.Second, "the deleted pool is made again", func() error {
		p := &ipamv1.IPPool{}
		if err := f.C.Get(context.Background(), client.ObjectKey{Name: "blue-10.42.0.0-24"}, p); err != nil {
			return err
		}
		if p.UID == pool.UID {
			return fmt.Errorf("still the old pool")
		}
		return nil
	})
}

func TestNADReferencingAPoolIsCheckedAgainstItsNamespaceSelector(t *testing.T) {
	f := ctrltest.NewFixture(t, map[string]string{"team": "red"})
	shared := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Spec: ipamv1.IPPoolSpec{Range: "10.44.0.0/24", NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"team": "blue"},
		}},
	}
	f.Create(shared)
	open := f.Pool("open", "10.45.0.0/24", "")
	startManager(t, ctrltest.TestOptions())

	refused := f.NAD("refused", ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","pool":"shared"}`))
	admitted := f.NAD("admitted", ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","pool":"`+open.Name+`"}`))
	missing := f.NAD("missing", ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","pool":"nowhere"}`))

	poll.Eventually(t, 5*time.Second, "the NAD its pool does not admit gets a Warning", func() error {
		return f.WantEvent(refused.UID, corev1.EventTypeWarning, EventPoolUnusable,
			"IPPool shared does not admit namespace "+f.NS, "team=blue")
	})
	poll.Eventually(t, 5*time.Second, "the NAD of a missing pool gets a Warning", func() error {
		return f.WantEvent(missing.UID, corev1.EventTypeWarning, EventPoolUnusable, `pool "nowhere": no IPPool of that name`)
	})
	poll.Consistently(t, time.Second, "the admitted NAD gets no Warning", func() error {
		if notes := f.EventsFor(admitted.UID, corev1.EventTypeWarning, EventPoolUnusable); len(notes) != 0 {
			return fmt.Errorf("warnings: %q", notes)
		}
		return nil
	})
}
