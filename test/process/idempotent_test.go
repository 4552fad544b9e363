package process

import (
	"net/netip"
	"testing"

	"github.com/netpool/netpool/test/harness"
)

func TestRepeatedAddReturnsTheSameAddress(t *testing.T) {
	ctx := testContext(t)
	f := newFixture(t, map[string]any{"range": "10.30.0.0/24"})

	first := f.mustAdd(ctx, "pod-a")
	other := f.mustAdd(ctx, "pod-b")
	again := f.mustAdd(ctx, "pod-a")
	if again != first {
		t.Errorf("second ADD of pod-a/eth0 returned %s, the first %s", again, first)
	}
	if other == first {
		t.Errorf("pod-a and pod-b both got %s", first)
	}
	if want := netip.MustParseAddr("10.30.0.1"); first != want {
		t.Errorf("first ADD into an empty 10.30.0.0/24 got %s, want %s", first, want)
	}

	// Another interface of the same container is another attachment.
	out, err := harness.Exec(ctx, f.plugin, harness.Invocation{
		Command: "ADD", ContainerID: "pod-a", IfName: "net1", Config: f.conf,
	})
	if err != nil {
		t.Fatalf("ADD pod-a/net1: %v", err)
	}
	addrs, err := out.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 || addrs[0] == first || addrs[0] == other {
		t.Errorf("ADD pod-a/net1 returned %v, want one address other than %s and %s", addrs, first, other)
	}
	if held := f.held(ctx); len(held) != 3 {
		t.Errorf("store holds %d allocations after 3 distinct attachments, want 3: %v", len(held), held)
	}
}
