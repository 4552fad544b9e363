// Package clock is the reconcilers' clock, so that tests can age objects past a grace period
// without waiting.
package clock

import "time"

// Func is a reconciler's clock; nil is time.Now.
type Func func() time.Time

// Now is the time on f.
func (f Func) Now() time.Time {
	if f != nil {
		return f()
	}
	return time.Now()
}
