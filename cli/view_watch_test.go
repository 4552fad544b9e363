package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/boltstore"
	"github.com/netpool/netpool/ipam"
	"github.com/netpool/netpool/test/poll"
)

// watchBuffer is a bytes.Buffer that a watching command writes while the test reads it.
type watchBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *watchBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *watchBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// watchPools runs pools --watch with args until it has printed the list twice, calling change
// after the first; it returns the output and checks that the watch ends, without error, when its
// context does, and that it printed nothing while nothing changed.
func watchPools(t *testing.T, args []string, change func()) string {
	t.Helper()
	var out, errOut watchBuffer
	root := newRoot(&out, &errOut, viewClock)
	root.SetArgs(append(args, "pools", "--watch", "--watch-interval", "20ms"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	headers := func() int { return strings.Count(out.String(), "NAME ") }
	waitFor := func(what string, n int) {
		t.Helper()
		poll.Eventually(t, 20*time.Second, what, func() error {
			select {
			case err := <-done:
				t.Fatalf("watch ended (%v) before %s; printed %q", err, what, out.String())
			default:
			}
			if headers() != n {
				return fmt.Errorf("printed %q", out.String())
			}
			return nil
		})
	}
	waitFor("first listing", 1)
	time.Sleep(100 * time.Millisecond) // five polls that see no change
	if headers() != 1 {
		t.Fatalf("watch printed an unchanged list again:\n%s", out.String())
	}
	change()
	waitFor("second listing", 2)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch did not end when its context did")
	}
	return out.String()
}

// lastRow returns the fields of the row of the last listing in out whose first cell is name.
func lastRow(t *testing.T, out, name string) []string {
	t.Helper()
	for _, l := range strings.Split(out[strings.LastIndex(out, "NAME "):], "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return f
		}
	}
	t.Fatalf("no row %s in the last listing of\n%s", name, out)
	return nil
}

// TestPoolsWatch: --watch on a bbolt file prints the list again when a claim changes it, and
// holds the file's lock only while it reads: the plugin's claim gets the file meanwhile.
func TestPoolsWatch(t *testing.T) {
	db := boltFixture(t)
	out := watchPools(t, []string{"--db", db, "--network", "tenant-a"}, func() {
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
	})
	if row := lastRow(t, out, "tenant-a/10.77.0.0/28"); row[4] != "3" || row[5] != "6" {
		t.Fatalf("the second listing does not show the claim (used 3, free 6): %v", row)
	}
}

// TestPoolsWatchCluster: the same against a cluster, where an agent's new reservation changes it.
func TestPoolsWatchCluster(t *testing.T) {
	f := newClusterFixture(t)
	out := watchPools(t, []string{"--kubeconfig", f.env.Kubeconfig, "--network", ctlNetwork}, func() {
		f.reserve(t, ctlPoolA, "10.78.0.3", "web-0", "uid", "net3", "node-a")
	})
	if row := lastRow(t, out, ctlPoolA); row[4] != "3" || row[5] != "6" {
		t.Fatalf("the second listing does not show the reservation (used 3, free 6): %v", row)
	}
}
