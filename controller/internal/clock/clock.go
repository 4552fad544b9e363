package controller

import "time"

// nowFunc is a reconciler's clock, so that tests can age objects without waiting; nil is time.Now.
type nowFunc func() time.Time

func (f nowFunc) now() time.Time {
	if f != nil {
		return f()
	}
	return time.Now()
}
