package ipamplugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/netpool/netpool/cni-plugin/agentproto"
	"github.com/netpool/netpool/ipam"
)

// forwardGrace is added to the agent's own bound when the plugin waits for its answer, so the
// agent's error (which names the cause) arrives before the plugin gives up on it.
const forwardGrace = 5 * time.Second

// route serves a verb: through the node agent when the config selects datastore kubernetes and this
// Plugin forwards (the binary), else here with local (the bbolt datastore, and the agent itself).
// The config is loaded once per call, here: the plugin's start-up is its hot path.
func (p *Plugin) route(verb string, args *skel.CmdArgs, local func(*skel.CmdArgs, *ipam.Config) error) error {
	if err := checkEnv(args); err != nil {
		return err
	}
	cfg, err := ipam.Load(args.StdinData, args.Args, p.ReadFile)
	if err != nil {
		return err
	}
	if p.Forward != nil && cfg.Datastore == ipam.DatastoreKubernetes {
		return p.forward(cfg, verb, args)
	}
	return local(args, cfg)
}

// forward sends one verb to the agent at cfg.AgentSocket and relays its answer: the result bytes to
// Stdout, or its CNI error unchanged. An agent that cannot be reached or does not answer is CNI
// error 11 (try again later), so the runtime retries instead of failing the pod for good.
func (p *Plugin) forward(cfg *ipam.Config, verb string, args *skel.CmdArgs) error {
	// The agent bounds its own work by the lock timeout (lock wait plus API retries, then the
	// rollback), so twice that plus a grace period is never cut short by the plugin.
	ctx, cancel := context.WithTimeout(context.Background(), 2*cfg.LockTimeout+forwardGrace)
	defer cancel()
	req := &agentproto.Request{
		Verb: verb, ContainerID: args.ContainerID, Netns: args.Netns, IfName: args.IfName,
		Args: args.Args, Path: args.Path, NetnsOverride: args.NetnsOverride, Stdin: args.StdinData,
	}
	if err := req.Validate(); errors.Is(err, agentproto.ErrTooLarge) {
		// Retrying cannot make it fit: the config is the problem, not the agent.
		return fmt.Errorf("%w: %w", ipam.ErrInvalidConfig, err)
	}
	// Under Multus' thick plugin the host's /run is /host/run: find the socket where it is.
	resp, err := p.Forward(ctx, hostPath(cfg.AgentSocket, os.Stat), req)
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return &types.Error{Code: resp.Error.Code, Msg: resp.Error.Msg, Details: resp.Error.Details}
	}
	if len(resp.Stdout) == 0 {
		return nil
	}
	if _, err := p.Stdout.Write(resp.Stdout); err != nil {
		return fmt.Errorf("failed to write the agent's result: %w", err)
	}
	return nil
}
