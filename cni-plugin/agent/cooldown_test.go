package agent

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netpool/netpool/test/envtest"
)

// TestCooldown drives the reuse cool-down through the agent as the plugin forwards calls: a
// released address is passed over while others are free, handed out oldest release first when only
// cooling addresses remain, and a config stating another cool-down than its pool's is refused.
func TestCooldown(t *testing.T) {
	env := envtest.Shared(t)
	n := MustRun(t, env, "node-cool", filepath.Join(socketDir(t), "a.sock"), Options{})
	sh := newShim()

	t.Run("100 ADDs pass over a cooling address", func(t *testing.T) {
		c := netConf("cool-a", n.socket, `,"network_name":"cool-a","range":"10.143.0.0/24","reuseCooldown":"1h"`)
		// Asked for by name, so the round-robin cursor stays at the window's start: without a
		// cool-down the next ADD would get .1 straight back.
		if _, err := sh.call("ADD", "x", "IP=10.143.0.1", c); err != nil {
			t.Fatal(err)
		}
		if _, err := sh.call("DEL", "x", "", c); err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			if ip := sh.addIP(t, fmt.Sprintf("p%d", i), c); ip == "10.143.0.1" {
				t.Fatalf("ADD %d got the cooling 10.143.0.1", i)
			}
		}
	})

	t.Run("only cooling addresses left, the oldest release first", func(t *testing.T) {
		c := netConf("cool-b", n.socket, `,"network_name":"cool-b","range":"10.143.1.0/29","reuseCooldown":"1h"`)
		held := map[string]string{}
		for i := range 6 {
			id := fmt.Sprintf("a%d", i)
			held[id] = sh.addIP(t, id, c)
		}
		for _, id := range []string{"a3", "a1", "a5"} {
			if _, err := sh.call("DEL", id, "", c); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := sh.call("STATUS", "", "", c); err != nil {
			t.Errorf("STATUS with only cooling addresses free = %v, want success", err)
		}
		for i, want := range []string{"a3", "a1", "a5"} {
			if ip := sh.addIP(t, fmt.Sprintf("b%d", i), c); ip != held[want] {
				t.Errorf("ADD b%d got %s, want %s (released by %s, the oldest release left)", i, ip, held[want], want)
			}
		}
		_, err := sh.call("ADD", "b3", "", c)
		wantCode(t, err, 100, "no free address in IPPool cool-b-10.143.1.0-29")
	})

	t.Run("a config stating another cool-down than its pool's", func(t *testing.T) {
		first := netConf("cool-c", n.socket, `,"network_name":"cool-c","range":"10.143.2.0/24","reuseCooldown":"1h"`)
		other := netConf("cool-d", n.socket, `,"network_name":"cool-c","range":"10.143.2.0/24","reuseCooldown":"5m"`)
		sh.addIP(t, "c0", first)
		_, err := sh.call("ADD", "d0", "", other)
		wantCode(t, err, types.ErrInvalidNetworkConfig, "reuseCooldown 5m0s disagrees with IPPool cool-c-10.143.2.0-24, which records reuseCooldown 1h0m0s")
	})
}

// TestCooldownAcrossAnAgentRestart: an agent that stops (a rolling update) writes the cooling
// addresses it has not written behind yet, and its successor passes over them. Before, the
// successor resumed its round-robin after the highest address the node held and handed out the
// address released last at once, with 250 free.
func TestCooldownAcrossAnAgentRestart(t *testing.T) {
	env := envtest.Shared(t)
	socket := filepath.Join(socketDir(t), "a.sock")
	n := MustRun(t, env, "node-cool-restart", socket, Options{})
	sh := newShim()
	c := netConf("cool-r", socket, `,"network_name":"cool-r","range":"10.147.0.0/24","reuseCooldown":"1h"`)
	var last string
	for i := range 5 {
		last = sh.addIP(t, fmt.Sprintf("p%d", i), c)
	}
	if _, err := sh.call("DEL", "p4", "", c); err != nil {
		t.Fatal(err)
	}
	n.stop(t) // at once: well within the write-behind delay
	MustRun(t, env, "node-cool-restart", socket, Options{})
	for i := range 20 {
		if ip := sh.addIP(t, fmt.Sprintf("q%d", i), c); ip == last {
			t.Fatalf("ADD %d after the restart got %s, released just before it", i, ip)
		}
	}
}
