package poll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fatalTB records a Fatalf and ends the goroutine, as testing's does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func run(tb *fatalTB, fn func(testing.TB)) (failed bool) {
	defer func() {
		if r := recover(); r != nil {
			if r != tb {
				panic(r)
			}
			failed = true
		}
	}()
	fn(tb)
	return false
}

func TestEventuallyReturnsOnceTheCheckPasses(t *testing.T) {
	var n atomic.Int32
	tb := &fatalTB{}
	if run(tb, func(tb testing.TB) {
		Eventually(tb, 5*time.Second, "third time", func() error {
			if n.Add(1) < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	}) {
		t.Fatalf("failed: %s", tb.msg)
	}
	if n.Load() != 3 {
		t.Fatalf("%d checks, want 3", n.Load())
	}
}

func TestEventuallyFailsWithTheLastError(t *testing.T) {
	tb := &fatalTB{}
	if !run(tb, func(tb testing.TB) {
		Eventually(tb, 200*time.Millisecond, "never", func() error { return errors.New("still 3 left") })
	}) {
		t.Fatal("a check that never passes did not fail")
	}
	if !strings.Contains(tb.msg, "never: not within 200ms") || !strings.Contains(tb.msg, "still 3 left") {
		t.Fatalf("message %q", tb.msg)
	}
}

func TestConsistentlyFailsAtTheFirstError(t *testing.T) {
	var n atomic.Int32
	tb := &fatalTB{}
	if !run(tb, func(tb testing.TB) {
		Consistently(tb, 5*time.Second, "holds", func() error {
			if n.Add(1) == 2 {
				return errors.New("broke")
			}
			return nil
		})
	}) || n.Load() != 2 || !strings.Contains(tb.msg, "holds: broke") {
		t.Fatalf("checks %d, message %q", n.Load(), tb.msg)
	}
	n.Store(0)
	start := time.Now()
	if run(tb, func(tb testing.TB) {
		Consistently(tb, 200*time.Millisecond, "holds", func() error { n.Add(1); return nil })
	}) {
		t.Fatal("a check that always passes failed")
	}
	if time.Since(start) < 200*time.Millisecond || n.Load() < 2 {
		t.Fatalf("checked %d times in %s", n.Load(), time.Since(start))
	}
}

func TestUntilStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := Until(ctx, 10*time.Millisecond, func(context.Context) error { return errors.New("down") })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "down") {
		t.Fatalf("Until: %v", err)
	}
}
