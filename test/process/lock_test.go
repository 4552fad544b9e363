package process

import (
	"testing"
	"time"

	"github.com/netpool/netpool/test/harness"
)

func TestAddFailsWithTryAgainWhileStoreIsLocked(t *testing.T) {
	ctx := testContext(t)
	f := newFixture(t, map[string]any{"range": "10.20.0.0/24", "lock_timeout": "300ms"})

	s := f.mustOpen() // holds the store's lock until closed
	out, err := f.exec(ctx, "ADD", "blocked")
	closeErr := s.Close()
	if err == nil {
		t.Fatalf("ADD while the store is locked succeeded with %s, want CNI error %d", out.Stdout, codeTryAgainLater)
	}
	if code := harness.CNIErrorCode(err); code != codeTryAgainLater {
		t.Fatalf("ADD while the store is locked: %v; want CNI error code %d, got %d", err, codeTryAgainLater, code)
	}
	if out.Elapsed < 200*time.Millisecond || out.Elapsed > 2*time.Second {
		t.Errorf("ADD gave up after %v, want about the 300ms lock timeout and at most 2s", out.Elapsed)
	}
	if closeErr != nil {
		t.Fatal(closeErr)
	}

	// Once the lock is free, the same attachment gets an address and nothing was left behind.
	a := f.mustAdd(ctx, "blocked")
	if held := f.held(ctx); len(held) != 1 || held[0].Addr != a {
		t.Errorf("store holds %v after one ADD of %s, want only that", held, a)
	}
}
