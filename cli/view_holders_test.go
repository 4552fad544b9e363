package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/boltstore"
	"github.com/netpool/netpool/ipam"
)

// TestBareHostHolderAndCooling: on a bare host (no pod in CNI_ARGS) the views name the holder by
// its container ID, shortened as crictl prints it; an address released under the pool's reuse
// cool-down shows as Cooling in whois and show, with when it was released, from the store's own
// cool-down records.
func TestBareHostHolderAndCooling(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netpool.db")
	s, err := boltstore.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	released := time.Now().Add(-3 * time.Second)
	clock := released
	a := allocator.New(s).WithClock(func() time.Time { return clock })
	c, err := ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"hostnet","ipam":{"type":"netpool","range":"10.66.0.0/29","reuseCooldown":"1m"}}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("ab12", 16)
	ctx := context.Background()
	for _, id := range []string{long, "gone-ctr"} {
		if _, err := a.Add(ctx, c, allocator.Owner{ContainerID: id, IfName: "eth1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Del(ctx, c, allocator.Owner{ContainerID: "gone-ctr", IfName: "eth1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	now := released.Add(3 * time.Second)
	out, _, err := runView(t, now, "", "--db", path, "show", "10.66.0.0/29")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "container "+long[:13]+" ") || strings.Contains(out, long[:14]) {
		t.Errorf("show does not name the bare host's holder by its short container ID:\n%s", out)
	}
	want := "Cooling (released 3s ago, for the pool's reuseCooldown, which the file does not record)"
	if !strings.Contains(out, "10.66.0.2   "+want) {
		t.Errorf("show does not list the released address as cooling:\n%s", out)
	}
	out, _, err = runView(t, now, "", "--db", path, "whois", "10.66.0.2")
	if err != nil || !strings.Contains(out, want) {
		t.Errorf("whois of the cooling address: %v\n%s", err, out)
	}
	out, _, err = runView(t, now, "", "--db", path, "-o", "json", "show", "10.66.0.0/29")
	if err != nil || !strings.Contains(out, `"cooling": [`) || !strings.Contains(out, `"holder": "container `+long[:13]+`"`) {
		t.Errorf("show -o json: %v\n%s", err, out)
	}
}
