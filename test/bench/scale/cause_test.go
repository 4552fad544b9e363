package main

import (
	"maps"
	"testing"

	"github.com/netpool/netpool/test/apicount"
)

func TestAttribute(t *testing.T) {
	c := apicount.Counts{
		Causes: map[string]int{
			"ippoolslices ADDED node-1":                       2,
			"ippoolslices ADDED node-2":                       1,
			"overlappingrangeipreservations DELETED node-1":   3,
			"overlappingrangeipreservations MODIFIED node-10": 4, // a name that starts with node-1's
			"ippools MODIFIED -":                              5,
			"nodes " + apicount.Undecoded:                     6,
			"namespaces " + apicount.Undecoded:                7,
			"ippoolslices " + apicount.Undecoded:              8,
		},
		CauseBytes: map[string]int64{"ippoolslices ADDED node-1": 20, "ippoolslices ADDED node-2": 10, "ippools MODIFIED -": 50},
	}
	got := attribute(c, "node-1")
	want := map[string]int{
		"ippoolslices own": 2, "ippoolslices other node": 9, "overlappingrangeipreservations own": 3,
		"overlappingrangeipreservations other node": 4, "ippools no node": 5, "nodes own": 6, "namespaces no node": 7,
	}
	if !maps.Equal(got.Causes, want) {
		t.Errorf("causes %v, want %v", got.Causes, want)
	}
	if n, b := eventsOf(got, causeOwn); n != 11 || b != 20 {
		t.Errorf("own: %d events, %d B; want 11, 20", n, b)
	}
	if n, b := eventsOf(got, causeOtherNode); n != 13 || b != 10 {
		t.Errorf("other nodes': %d events, %d B; want 13, 10", n, b)
	}
	if n, _ := eventsOf(got, causeOtherNode, causeNoNode); n != 25 {
		t.Errorf("others': %d events, want 25", n)
	}
	sum := apicount.Counts{Causes: map[string]int{}, CauseBytes: map[string]int64{}}
	sum.Add(got)
	sum.Add(attribute(c, "node-2"))
	if n, _ := eventsOf(sum, causeOwn); n != 11+1+6 {
		t.Errorf("own over two nodes: %d, want 18", n)
	}
}
