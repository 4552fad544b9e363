package controller

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/scheme"
)

// Fakes for the unit tests of the reconcilers' error paths, which call Reconcile directly.

// fakeClient is controller-runtime's fake client with the controller's scheme and indexes,
// holding objs, with funcs intercepting its calls (fault injection).
func fakeClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.WithWatch {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&ipamv1.IPPool{}).WithInterceptorFuncs(funcs)
	for _, ix := range fieldIndexes() {
		b = b.WithIndex(ix.obj, ix.field, ix.extract)
	}
	// The API server's selectable fields, which the controller reads live, have the names of the
	// cache's spec.pool indexes (reservationPoolField, slicePoolField), so those serve both here.
	return b.Build()
}

// recordedEvent is one Event a fakeRecorder got.
type recordedEvent struct {
	regarding runtime.Object
	eventType string
	reason    string
	note      string
}

// fakeRecorder records Events in memory.
type fakeRecorder struct {
	mu     sync.Mutex
	events []recordedEvent
}

var _ events.EventRecorder = &fakeRecorder{}

func (f *fakeRecorder) Eventf(regarding, _ runtime.Object, eventType, reason, _, note string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, recordedEvent{regarding, eventType, reason, fmt.Sprintf(note, args...)})
}

func (f *fakeRecorder) all() []recordedEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedEvent(nil), f.events...)
}

// mustMetrics returns metrics on a registry of their own.
func mustMetrics(t *testing.T) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// value reads a counter or gauge.
func value(t *testing.T, c prometheus.Metric) float64 {
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

// series counts the series a collector holds.
func series(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 1000)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

// clock is a settable time for the reconcilers' Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// aged sets obj's creation time to d before c's now and gives it a UID.
func aged[T client.Object](c *clock, obj T, d time.Duration) T {
	obj.SetCreationTimestamp(metav1.NewTime(c.Now().Add(-d)))
	if obj.GetUID() == "" {
		obj.SetUID(types.UID("uid-" + obj.GetName()))
	}
	return obj
}
