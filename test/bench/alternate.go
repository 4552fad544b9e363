package main

import "time"

// call is one measured call; i numbers the calls of its series from 0.
type call func(i int) (time.Duration, error)

// alternate measures n calls of a and n of b, interleaved one by one and with the order flipped on
// every round, so that drift in the machine's load (other jobs, page cache, CPU frequency) weighs
// on both series alike.
func alternate(n int, a, b call) (sample, sample, error) {
	sa, sb := make(sample, 0, n), make(sample, 0, n)
	for i := range n {
		first, second := a, b
		if i%2 == 1 {
			first, second = b, a
		}
		d1, err := first(i)
		if err != nil {
			return nil, nil, err
		}
		d2, err := second(i)
		if err != nil {
			return nil, nil, err
		}
		if i%2 == 1 {
			d1, d2 = d2, d1
		}
		sa, sb = append(sa, d1), append(sb, d2)
	}
	return sa, sb, nil
}
