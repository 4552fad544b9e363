package derivedpool

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/poll"
)

// A NAD with 300 inline ranges used to make 300 cluster-scoped pools, and every pool a NAD ever
// derived stayed for ever. Derived pools that no NAD uses and that hold nothing are removed;
// operators' pools, used pools and pools holding a reservation or a slice stay.
func TestDerivedPoolsNoNADUsesAreRemoved(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	startManager(t, ctrltest.TestOptions()) // Grace: 1s
	ctx := context.Background()
	pool := func(name string) *ipamv1.IPPool { return &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}} }

	unused := f.NAD("unused", ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","range":"10.62.0.0/24"}`))
	withAddress := f.NAD("with-address", ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","range":"10.63.0.0/24"}`))
	f.NAD("in-use", ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","range":"10.64.0.0/24"}`))
	operators := f.Pool("ops-unused", "10.66.0.0/24", "")
	for _, name := range []string{"10.62.0.0-24", "10.63.0.0-24", "10.64.0.0-24"} {
		poll.Eventually(t, 10*time.Second, "the NAD's pool "+name+" is created", f.Exists(pool(name)))
	}
	f.Node("node-a") // a reservation of a node that does not exist is reclaimed
	pod := f.Pod("holder", corev1.PodRunning, "10.63.0.5")
	res := f.Reservation("10.63.0.0-24", "10.63.0.5", pod, "node-a")

	for _, nad := range []client.Object{unused, withAddress} {
		if err := f.C.Delete(ctx, nad); err != nil {
			t.Fatal(err)
		}
	}
	poll.Eventually(t, 10*time.Second, "the pool no NAD uses is removed", f.Gone(pool("10.62.0.0-24")))
	poll.Consistently(t, 2*time.Second, "used pools and operators' pools stay", func() error {
		for _, p := range []*ipamv1.IPPool{pool("10.63.0.0-24"), pool("10.64.0.0-24"), operators} {
			if err := f.Exists(p)(); err != nil {
				return err
			}
		}
		return nil
	})
	if err := f.C.Delete(ctx, res); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, "the pool is removed once its last reservation goes", f.Gone(pool("10.63.0.0-24")))
}

// What keeps a derived pool: a NAD, a reservation or a slice (a slice goes back to its pool once
// empty, so on a live cluster it keeps the pool only while the node holds the block).
func TestDerivedPoolInUse(t *testing.T) {
	nad := ctrltest.TestNAD(ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24"}`))
	slice := &ipamv1.IPPoolSlice{ObjectMeta: metav1.ObjectMeta{Name: "10.1.0.0-24.0"}, Spec: ipamv1.IPPoolSliceSpec{Pool: "10.1.0.0-24", Range: "10.1.0.0/26", Node: "n"}}
	res := ctrltest.NewReservation("10.2.0.0-24", "10.2.0.5", nil, "n")
	r := &Reconciler{Client: ctrltest.FakeClient(t, interceptor.Funcs{}, nad, slice, res)}
	for pool, want := range map[string]string{"10.0.0.0-24": "NAD ns/net", "10.1.0.0-24": "slice 10.1.0.0-24.0", "10.2.0.0-24": "reservation 10.2.0.0-24.10.2.0.5", "10.3.0.0-24": ""} {
		if got, err := r.inUse(context.Background(), pool); err != nil || got != want {
			t.Errorf("inUse(%s) = %q, %v, want %q", pool, got, err, want)
		}
	}
	if err := (&Reconciler{}).SetupWithManager(nil); err == nil {
		t.Fatal("SetupWithManager without clients succeeded")
	}
}
