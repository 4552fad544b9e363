package envtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/poll"
)

// WarmUp creates and deletes one IPPool: the API server's first IPPool write after it starts takes
// about 2 s (it prepares the kind's validation rules; the other kinds' first writes take
// milliseconds), longer than the short bounds that outage tests give their calls.
func (e *Env) WarmUp(t testing.TB) {
	t.Helper()
	p := &ipamv1.IPPool{Spec: ipamv1.IPPoolSpec{Range: "192.0.2.0/24"}}
	p.Name = "warm-up"
	ctx := context.Background()
	if err := e.Client.Create(ctx, p); err != nil {
		t.Fatalf("warming up: %v", err)
	}
	if err := e.Client.Delete(ctx, p); err != nil {
		t.Fatalf("warming up: %v", err)
	}
}

// SettledReservations lists the reservations of pool once the list has stopped changing for a
// second, so that calls of killed plugin processes still under way in an agent have finished. It
// fails t if the list keeps changing for 30 s.
func (e *Env) SettledReservations(t testing.TB, pool string) []ipamv1.OverlappingRangeIPReservation {
	t.Helper()
	var last []ipamv1.OverlappingRangeIPReservation
	lastKey, stable := "", time.Now()
	poll.Eventually(t, 30*time.Second, "the reservations of pool "+pool+" stop changing", func() error {
		var list ipamv1.OverlappingRangeIPReservationList
		if err := e.Client.List(context.Background(), &list, client.MatchingLabels{ipamv1.PoolLabel: ipamv1.LabelValue(pool)}); err != nil {
			return err
		}
		var key strings.Builder
		for _, r := range list.Items {
			key.WriteString(r.Name + "/" + string(r.UID) + ",")
		}
		if key.String() != lastKey {
			last, lastKey, stable = list.Items, key.String(), time.Now()
			return fmt.Errorf("%d reservations, changed a moment ago", len(list.Items))
		}
		if since := time.Since(stable); since < time.Second {
			return fmt.Errorf("%d reservations, unchanged for %s only", len(list.Items), since.Round(time.Millisecond))
		}
		return nil
	})
	return last
}
