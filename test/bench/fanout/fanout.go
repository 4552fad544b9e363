// Package fanout runs a bench's n calls from a fixed number of goroutines, as a load generator
// with that many requests in flight.
package fanout

import (
	"sync"
	"sync/atomic"
)

// Each calls f(i) for every i in [0, n) from workers goroutines, each taking the next index as it
// finishes the last, and returns when every call has. f counts its own failures: a bench measures
// every call, failed or not.
func Each(n, workers int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}
