package ctrltest

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Clock is a settable time for the reconcilers' Now in the unit tests that call Reconcile
// directly: it moves only when the test advances it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock is a Clock at a fixed date.
func NewClock() *Clock { return &Clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Aged sets obj's creation time to d before c's now and gives it a UID.
func Aged[T client.Object](c *Clock, obj T, d time.Duration) T {
	obj.SetCreationTimestamp(metav1.NewTime(c.Now().Add(-d)))
	if obj.GetUID() == "" {
		obj.SetUID(types.UID("uid-" + obj.GetName()))
	}
	return obj
}
