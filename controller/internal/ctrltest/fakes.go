package ctrltest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/netpool/netpool/controller/internal/index"
	"github.com/netpool/netpool/controller/internal/metrics"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/scheme"
)

// Fakes for the unit tests of the reconcilers' error paths, which call Reconcile directly.

// ErrExpected is the error of fakes that inject failures.
var ErrExpected = errors.New("injected failure")

// FakeClient is controller-runtime's fake client with the controller's scheme and indexes,
// holding objs, with funcs intercepting its calls (fault injection).
func FakeClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.WithWatch {
	t.Helper()
	kinds, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(kinds).WithObjects(objs...).
		WithStatusSubresource(&ipamv1.IPPool{}).WithInterceptorFuncs(funcs)
	for _, ix := range index.All() {
		b = b.WithIndex(ix.Obj, ix.Name, ix.Extract)
	}
	// The API server's selectable fields, which the controller reads live, have the names of the
	// cache's spec.pool indexes (index.ReservationPool, index.SlicePool), so those serve both here.
	return b.Build()
}

// RecordedEvent is one Event a FakeRecorder got.
type RecordedEvent struct {
	Regarding runtime.Object
	EventType string
	Reason    string
	Note      string
}

// FakeRecorder records Events in memory.
type FakeRecorder struct {
	mu     sync.Mutex
	events []RecordedEvent
}

var _ events.EventRecorder = &FakeRecorder{}

// Eventf records the Event.
func (f *FakeRecorder) Eventf(regarding, _ runtime.Object, eventType, reason, _, note string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, RecordedEvent{regarding, eventType, reason, fmt.Sprintf(note, args...)})
}

// All returns the Events recorded so far.
func (f *FakeRecorder) All() []RecordedEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]RecordedEvent(nil), f.events...)
}

// MustMetrics returns metrics on a registry of their own.
func MustMetrics(t *testing.T) *metrics.Metrics {
	t.Helper()
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Value reads a counter or gauge.
func Value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// Series counts the series a collector holds.
func Series(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 1000)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

// TypeName is v's Go type, for fakes that fail calls on one kind.
func TypeName(v any) string { return fmt.Sprintf("%T", v) }

// RequestNames joins the names of reqs, for comparing the requests a map function gives.
func RequestNames(reqs []reconcile.Request) string {
	var names []string
	for _, r := range reqs {
		names = append(names, r.Name)
	}
	return strings.Join(names, " ")
}

// CountExisting counts how many of objs c still has.
func CountExisting(t *testing.T, c client.Reader, objs []client.Object) int {
	t.Helper()
	n := 0
	for _, o := range objs {
		err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
		switch {
		case err == nil:
			n++
		case !errors.Is(err, ErrExpected) && !strings.Contains(err.Error(), "not found"):
			t.Fatal(err)
		}
	}
	return n
}
