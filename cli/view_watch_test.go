package cli

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/boltstore"
	"github.com/netpool/netpool/ipam"
)

// syncBuffer is a bytes.Buffer that a watching command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPoolsWatch: --watch prints the list, prints it again when a claim changes it (and not
// while nothing changes), holds the file's lock only while it reads, and ends without error
// when its context ends.
func TestPoolsWatch(t *testing.T) {
	db := boltFixture(t)
	var out, errOut syncBuffer
	root := newRoot(&out, &errOut, viewClock)
	root.SetArgs([]string{"--db", db, "pools", "--watch", "--watch-interval", "20ms", "--network", "tenant-a"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for !ok(out.String()) {
			select {
			case err := <-done:
				t.Fatalf("watch ended (%v) before %s; printed %q", err, what, out.String())
			case <-deadline:
				t.Fatalf("no %s; printed %q", what, out.String())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	headers := func(s string) int { return strings.Count(s, "NAME ") }
	waitFor("first listing", func(s string) bool { return headers(s) == 1 })

	// The watch holds no lock between polls: the plugin's claim gets the file at once.
	s, err := boltstore.Open(db, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"macvlan1","ipam":{"type":"netpool","network_name":"tenant-a","range":"10.77.0.0/28","gateway":"10.77.0.1","exclude":["10.77.0.8/30"]}}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := allocator.New(s).Add(context.Background(), c, allocator.Owner{ContainerID: "new", IfName: "net1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor("second listing", func(s string) bool { return headers(s) == 2 })
	second := out.String()
	last := strings.Split(second[strings.LastIndex(second, "NAME "):], "\n")
	if row := strings.Fields(last[1]); len(row) < 6 || row[0] != "tenant-a/10.77.0.0/28" || row[4] != "3" || row[5] != "6" {
		t.Fatalf("the second listing does not show the claim (used 3, free 6):\n%s", second)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch did not end when its context did")
	}
	if headers(out.String()) != 2 {
		t.Fatalf("watch printed an unchanged list again:\n%s", out.String())
	}
}
