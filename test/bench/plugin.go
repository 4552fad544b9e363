package main

import (
	"context"
	"fmt"
	"time"

	"github.com/netpool/netpool/test/harness"
)

// plugin is one IPAM plugin under measurement: its binary and the network config it reads.
type plugin struct {
	name string
	bin  string
	conf []byte
}

// newPlugin builds the network config of network around ipam.
func newPlugin(name, bin, network string, ipam map[string]any) (plugin, error) {
	conf, err := harness.NetConf(network, ipam)
	if err != nil {
		return plugin{}, err
	}
	return plugin{name: name, bin: bin, conf: conf}, nil
}

// exec runs one verb for containerID/eth0.
func (p plugin) exec(ctx context.Context, verb, containerID string) (harness.Outcome, error) {
	out, err := harness.Exec(ctx, p.bin, harness.Invocation{
		Command: verb, ContainerID: containerID, IfName: "eth0", Config: p.conf,
	})
	if err != nil {
		return out, fmt.Errorf("%s %s %s: %w", p.name, verb, containerID, err)
	}
	return out, nil
}

// add runs ADD for containerID and checks that it returned an address.
func (p plugin) add(ctx context.Context, containerID string) (harness.Outcome, error) {
	out, err := p.exec(ctx, "ADD", containerID)
	if err != nil {
		return out, err
	}
	if addrs, err := out.Addrs(); err != nil || len(addrs) != 1 {
		return out, fmt.Errorf("%s ADD %s printed %q, want one address (%v)", p.name, containerID, out.Stdout, err)
	}
	return out, nil
}

// addDel returns a call that ADDs and then DELs a fresh attachment (prefix-i) and measures both
// processes, start-up included.
func (p plugin) addDel(ctx context.Context, prefix string) call {
	return func(i int) (time.Duration, error) {
		id := fmt.Sprintf("%s-%06d", prefix, i)
		add, err := p.add(ctx, id)
		if err != nil {
			return 0, err
		}
		del, err := p.exec(ctx, "DEL", id)
		if err != nil {
			return 0, err
		}
		return add.Elapsed + del.Elapsed, nil
	}
}
