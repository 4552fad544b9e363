package fanout

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestEachCallsEveryIndexOnceWithAtMostWorkersInFlight(t *testing.T) {
	for _, tc := range []struct{ n, workers int }{{0, 3}, {1, 3}, {100, 1}, {100, 7}, {5, 50}} {
		var mu sync.Mutex
		seen := map[int]int{}
		var inFlight, most atomic.Int64
		Each(tc.n, tc.workers, func(i int) {
			now := inFlight.Add(1)
			for {
				m := most.Load()
				if now <= m || most.CompareAndSwap(m, now) {
					break
				}
			}
			mu.Lock()
			seen[i]++
			mu.Unlock()
			inFlight.Add(-1)
		})
		if len(seen) != tc.n {
			t.Errorf("n %d, workers %d: %d distinct indexes called, want %d", tc.n, tc.workers, len(seen), tc.n)
		}
		for i, k := range seen {
			if i < 0 || i >= tc.n || k != 1 {
				t.Errorf("n %d, workers %d: index %d called %d times", tc.n, tc.workers, i, k)
			}
		}
		if most.Load() > int64(tc.workers) {
			t.Errorf("n %d, workers %d: %d calls in flight at once", tc.n, tc.workers, most.Load())
		}
	}
}
