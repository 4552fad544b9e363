package main

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// sample is the time of each call of one series.
type sample []time.Duration

// quantile returns the nearest-rank q-quantile (0 < q <= 1) of s, or the zero value when s is empty.
func quantile[T cmp.Ordered](s []T, q float64) T {
	var zero T
	if len(s) == 0 {
		return zero
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func (s sample) median() time.Duration { return quantile(s, 0.5) }

func (s sample) p90() time.Duration { return quantile(s, 0.9) }

// ratio is a's median over b's, or 0 when b has none.
func ratio(a, b sample) float64 {
	if b.median() <= 0 {
		return 0
	}
	return float64(a.median()) / float64(b.median())
}
