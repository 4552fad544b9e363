package main

import (
	"testing"
	"time"

	"github.com/netpool/netpool/test/bench/benchproc"
)

func TestWatchedObjectsMatchOneNodeEachInTurn(t *testing.T) {
	nodes := []string{"node-00000", "node-00001", "node-00002"}
	mk := watchedObject(nodes)
	seen := map[string]bool{}
	for i := range 7 {
		o := mk(i)
		if got, want := o.GetLabels()[benchNodeLabel], nodes[i%3]; got != want {
			t.Errorf("object %d labelled %q, want %q", i, got, want)
		}
		if seen[o.GetName()] {
			t.Errorf("object %d: name %s twice", i, o.GetName())
		}
		seen[o.GetName()] = true
		if o.GetName() == benchObject(i).GetName() {
			t.Errorf("object %d has the unwatched baseline's name %s", i, o.GetName())
		}
	}
}

// base returns a baseline whose Creates cost per each.
func base(short string, creates int, per time.Duration) *baseline {
	return &baseline{short: short, creates: creates,
		before: snapshot{apiserver: benchproc.Proc{CPU: 0}},
		after:  snapshot{apiserver: benchproc.Proc{CPU: per * time.Duration(creates)}}}
}

func TestRatiosAgainstEachBaseline(t *testing.T) {
	raws := []*baseline{base("unwatched CR", 100, 2*time.Millisecond), base("CR under 5 watches", 100, 4*time.Millisecond),
		base("tiny reservation", 10, 0)}
	got := ratios(5*time.Millisecond, raws)
	want := "2.50x the unwatched CR, 1.25x the CR under 5 watches, no CPU measured for the tiny reservation"
	if got != want {
		t.Errorf("ratios = %q, want %q", got, want)
	}
	if got := ratios(time.Millisecond, nil); got != "" {
		t.Errorf("ratios of no baseline = %q", got)
	}
}

func TestStormCost(t *testing.T) {
	perAgent, perObject := stormCost(20*time.Second, 1000, 31000)
	if perAgent != 20*time.Millisecond {
		t.Errorf("per agent = %s, want 20ms", perAgent)
	}
	if want := 20000.0 / 31000; perObject < want-1e-9 || perObject > want+1e-9 {
		t.Errorf("per agent per object = %g us, want %g", perObject, want)
	}
	if a, o := stormCost(time.Second, 0, 10); a != 0 || o != 0 {
		t.Errorf("no agents: %s, %g", a, o)
	}
	if _, o := stormCost(time.Second, 10, 0); o != 0 {
		t.Errorf("no objects: %g", o)
	}
}
