package ipamplugin

import (
	"bytes"
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/cni-plugin/agentproto"
	"github.com/netpool/netpool/ipam"
)

// TestErrorCodesOfBoundedInput covers inputs that used to come back as 999 ("a bug") or as 11 for
// ever: each now has a code a runtime can act on, and none changes the store.
func TestErrorCodesOfBoundedInput(t *testing.T) {
	h := newHarness(t)
	f := h.plugin.Funcs()
	stdin := h.conf(`,"range":"10.7.0.0/24"`, "")
	if err := h.run(f.Add, "keep", stdin); err != nil {
		t.Fatal(err)
	}

	t.Run("containerID of 40 KiB", func(t *testing.T) {
		wantCode(t, h.run(f.Add, strings.Repeat("c", 40<<10), stdin), types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID is 40960 bytes, longer than the 256")
		wantCode(t, h.run(f.Del, strings.Repeat("c", MaxContainerIDLen+1), stdin), types.ErrInvalidEnvironmentVariables, "longer than the 256")
	})
	t.Run("containerID at the limit", func(t *testing.T) {
		id := strings.Repeat("c", MaxContainerIDLen)
		if err := h.run(f.Add, id, stdin); err != nil {
			t.Fatalf("ADD with a %d-byte containerID: %v", len(id), err)
		}
		if err := h.run(f.Del, id, stdin); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("lock_timeout 1ns", func(t *testing.T) {
		conf := bytes.Replace(stdin, []byte(`"200ms"`), []byte(`"1ns"`), 1)
		wantCode(t, h.run(f.Add, "c2", conf), types.ErrInvalidNetworkConfig, `bbolt.lock_timeout "1ns": want a duration from 10ms to 5m0s`)
	})
	t.Run("a deadline that runs out is try again later", func(t *testing.T) {
		wantCode(t, toCNIError(context.DeadlineExceeded), types.ErrTryAgainLater, "deadline exceeded")
	})
	t.Run("GC without valid attachments", func(t *testing.T) {
		wantCode(t, h.run(f.GC, "", stdin), types.ErrInvalidNetworkConfig, `GC needs "cni.dev/valid-attachments"`)
		null := h.conf(`,"range":"10.7.0.0/24"`, `,"cni.dev/valid-attachments":null`)
		wantCode(t, h.run(f.GC, "", null), types.ErrInvalidNetworkConfig, `"cni.dev/valid-attachments" is null`)
		legacyNull := h.conf(`,"range":"10.7.0.0/24"`, `,"cni.dev/valid-attachments":[],"cni.dev/attachments":null`)
		wantCode(t, h.run(f.GC, "", legacyNull), types.ErrInvalidNetworkConfig, `"cni.dev/attachments" is null`)
	})
	// Nothing above changed the store: "keep" still holds its address.
	prev := h.conf(`,"range":"10.7.0.0/24"`, `,"prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.7.0.1/24"}]}`)
	if err := h.run(f.Check, "keep", prev); err != nil {
		t.Fatalf("CHECK after the rejected calls: %v", err)
	}
	t.Run("GC with an empty list releases all", func(t *testing.T) {
		if err := h.run(f.GC, "", h.conf(`,"range":"10.7.0.0/24"`, `,"cni.dev/valid-attachments":[]`)); err != nil {
			t.Fatal(err)
		}
		wantCode(t, h.run(f.Check, "keep", prev), CodeCheckFailed, "keep/eth0 holds no address")
	})
}

// TestForwardRejectsOversizedConfig: a config that cannot fit one agent message is invalid (7),
// not "try again later" for ever, and is never sent.
func TestForwardRejectsOversizedConfig(t *testing.T) {
	sent := 0
	p := forwardingPlugin(&bytes.Buffer{})
	p.Forward = func(context.Context, string, *agentproto.Request) (*agentproto.Response, error) {
		sent++
		return &agentproto.Response{}, nil
	}
	f := p.Funcs()
	pad := `,"dns":{"search":["` + strings.Repeat("a", agentproto.MaxStdinSize) + `"]}`
	big := kubeConf("/run/netpool/agent.sock", pad)
	wantCode(t, f.Add(&skel.CmdArgs{ContainerID: "c1", IfName: "net1", StdinData: big}), types.ErrInvalidNetworkConfig, "more than the 3096576 the agent accepts")
	if sent != 0 {
		t.Errorf("the oversized config was forwarded %d times", sent)
	}
	small := kubeConf("/run/netpool/agent.sock", "")
	if err := f.Add(&skel.CmdArgs{ContainerID: "c1", IfName: "net1", StdinData: small}); err != nil || sent != 1 {
		t.Errorf("a small config: err %v, forwarded %d times", err, sent)
	}
}

// waitingStore is a store whose calls wait until their context ends, as a store behind an API
// server that does not answer would.
type waitingStore struct{}

func (waitingStore) Update(ctx context.Context, _ func(context.Context, allocator.Txn) error) error {
	<-ctx.Done()
	return ctx.Err()
}
func (waitingStore) View(ctx context.Context, _ func(context.Context, allocator.Txn) error) error {
	<-ctx.Done()
	return ctx.Err()
}
func (waitingStore) Close() error { return nil }

// TestCallerDeadlineBoundsTheCall: the caller's context (the agent's per-call deadline) bounds the
// work even when the NAD's lock_timeout is the maximum, and running out is code 11.
func TestCallerDeadlineBoundsTheCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	p := &Plugin{
		Context: ctx, ReadFile: func(string) ([]byte, error) { return nil, fs.ErrNotExist },
		OpenStore: func(c *ipam.Config) (allocator.Store, *ipam.Config, error) { return waitingStore{}, c, nil },
		Stdout:    &bytes.Buffer{}, Stderr: &bytes.Buffer{},
	}
	stdin := []byte(`{"cniVersion":"1.1.0","name":"net1","ipam":{"type":"netpool","range":"10.5.0.0/24","bbolt":{"lock_timeout":"5m"}}}`)
	start := time.Now()
	err := p.Funcs().Add(&skel.CmdArgs{ContainerID: "c1", IfName: "eth0", StdinData: stdin})
	wantCode(t, err, types.ErrTryAgainLater, "deadline exceeded")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the call took %v despite a 100ms deadline", d)
	}
}
