package ipamplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/boltstore"
	"github.com/netpool/netpool/cni-plugin/agentproto"
	"github.com/netpool/netpool/ipam"
)

// SupportedVersions are the CNI spec versions the plugin speaks.
var SupportedVersions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// Plugin holds the plugin's dependencies on its environment, so tests can run the verbs in-process.
type Plugin struct {
	// ReadFile reads the global flat config file; ReadConfigFile in the binary.
	ReadFile ipam.FlatReader
	// OpenLog opens log_file for appending; nil means OpenLogFile (regular files only).
	OpenLog func(path string) (io.WriteCloser, error)
	// OpenStore opens the store a config selects, and returns the config resolved against it: a
	// store may fill in what the config leaves to it (the ranges of a referenced IPPool).
	OpenStore func(*ipam.Config) (allocator.Store, *ipam.Config, error)
	// Stdout receives the result; Stderr receives logs when the config names no log_file.
	Stdout io.Writer
	Stderr io.Writer
	// Context bounds every call's work together with lock_timeout; nil means no bound beyond it.
	// The node agent sets its per-call deadline here, so a NAD's lock_timeout cannot hold it longer.
	Context context.Context
	// Forward sends a datastore kubernetes call to the node agent (agentproto.Call in the binary).
	// nil serves every call here through OpenStore, as the agent itself does.
	Forward func(ctx context.Context, socket string, req *agentproto.Request) (*agentproto.Response, error)
}

// New returns the Plugin as the binary runs it.
func New() *Plugin {
	return &Plugin{ReadFile: ReadConfigFile, OpenStore: OpenStore, Stdout: os.Stdout, Stderr: os.Stderr, Forward: agentproto.Call}
}

// OpenStore opens the datastore a config selects. The embedded store resolves nothing: the config
// comes back as it is.
func OpenStore(c *ipam.Config) (allocator.Store, *ipam.Config, error) {
	switch c.Datastore {
	case ipam.DatastoreBbolt:
		st, err := boltstore.Open(c.BboltPath, c.LockTimeout)
		if err != nil {
			return nil, nil, err
		}
		return st, c, nil
	}
	// datastore kubernetes is served by the node agent; only a Plugin without Forward gets here.
	return nil, nil, fmt.Errorf("%w: %q is served by the netpool agent, and this process does not forward to it",
		errDatastoreNotServed, c.Datastore)
}

// Funcs are the verbs for skel.PluginMainFuncs.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{
		Add:    func(a *skel.CmdArgs) error { return toCNIError(p.route(agentproto.VerbAdd, a, p.add)) },
		Del:    func(a *skel.CmdArgs) error { return toCNIError(p.route(agentproto.VerbDel, a, p.del)) },
		Check:  func(a *skel.CmdArgs) error { return toCNIError(p.route(agentproto.VerbCheck, a, p.check)) },
		GC:     func(a *skel.CmdArgs) error { return toCNIError(p.route(agentproto.VerbGC, a, p.gc)) },
		Status: func(a *skel.CmdArgs) error { return toStatusError(p.route(agentproto.VerbStatus, a, p.status)) },
	}
}

// session is one invocation's loaded config, logger and open store.
type session struct {
	cfg   *ipam.Config
	log   *slog.Logger
	alloc *allocator.Allocator
	close func()
}

// open opens the store of cfg. The context it returns bounds the invocation's work and ends with
// close.
func (p *Plugin) open(cfg *ipam.Config) (context.Context, *session, error) {
	log, closeLog := p.logger(cfg)
	store, resolved, err := p.OpenStore(cfg)
	if err != nil {
		log.Error("Opening store failed", "datastore", cfg.Datastore, "path", cfg.BboltPath, "err", err)
		closeLog()
		return nil, nil, err
	}
	cfg = resolved
	// The lock wait is bounded by Open; the context bounds the work after it, so the runtime never
	// waits on netpool for longer than the lock timeout twice over.
	parent := p.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, cfg.LockTimeout)
	return ctx, &session{
		cfg: cfg, log: log, alloc: allocator.New(store),
		close: func() {
			cancel()
			if err := store.Close(); err != nil {
				log.Error("Closing store failed", "err", err)
			}
			closeLog()
		},
	}, nil
}

func owner(args *skel.CmdArgs) allocator.Owner {
	return allocator.Owner{ContainerID: args.ContainerID, IfName: args.IfName}
}

func (p *Plugin) add(args *skel.CmdArgs, cfg *ipam.Config) error {
	ctx, s, err := p.open(cfg)
	if err != nil {
		return err
	}
	defer s.close()
	start := time.Now()
	allocs, err := s.alloc.Add(ctx, s.cfg, owner(args))
	if err != nil {
		s.log.Error("ADD failed", "containerID", args.ContainerID, "ifName", args.IfName, "err", err)
		return err
	}
	result := &current.Result{CNIVersion: current.ImplementedSpecVersion, Routes: s.cfg.Routes, DNS: s.cfg.DNS}
	for i, al := range allocs {
		r := s.cfg.Ranges[i]
		ipc := &current.IPConfig{Address: net.IPNet{
			IP:   al.Addr.AsSlice(),
			Mask: net.CIDRMask(r.Subnet.Bits(), r.Subnet.Addr().BitLen()),
		}}
		if r.Gateway.IsValid() {
			ipc.Gateway = r.Gateway.AsSlice()
		}
		result.IPs = append(result.IPs, ipc)
		s.log.Debug("Allocated", "containerID", args.ContainerID, "ifName", args.IfName, "pool", al.Pool,
			"address", al.Addr, "elapsed", time.Since(start))
	}
	versioned, err := result.GetAsVersion(s.cfg.CNIVersion)
	if err != nil {
		return fmt.Errorf("%w: cannot express the result in cniVersion %q: %w", ipam.ErrInvalidConfig, s.cfg.CNIVersion, err)
	}
	return versioned.PrintTo(p.Stdout)
}

func (p *Plugin) del(args *skel.CmdArgs, cfg *ipam.Config) error {
	ctx, s, err := p.open(cfg)
	if err != nil {
		return err
	}
	defer s.close()
	released, err := s.alloc.Del(ctx, s.cfg, owner(args))
	for _, al := range released {
		s.log.Debug("Released", "containerID", args.ContainerID, "ifName", args.IfName, "pool", al.Pool, "address", al.Addr)
	}
	return err
}

func (p *Plugin) check(args *skel.CmdArgs, cfg *ipam.Config) error {
	ctx, s, err := p.open(cfg)
	if err != nil {
		return err
	}
	defer s.close()
	have, err := prevResultAddrs(args.StdinData)
	if err != nil {
		return err
	}
	return s.alloc.Check(ctx, s.cfg, owner(args), have)
}

// prevResultAddrs returns the addresses of the prevResult CHECK receives.
func prevResultAddrs(stdin []byte) ([]netip.Addr, error) {
	conf := &types.PluginConf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, fmt.Errorf("%w: failed to parse network config: %w", ipam.ErrInvalidConfig, err)
	}
	if conf.RawPrevResult == nil {
		return nil, fmt.Errorf("%w: CHECK needs a prevResult", ipam.ErrInvalidConfig)
	}
	if err := version.ParsePrevResult(conf); err != nil {
		return nil, fmt.Errorf("%w: failed to parse prevResult: %w", ipam.ErrInvalidConfig, err)
	}
	res, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return nil, fmt.Errorf("%w: failed to convert prevResult: %w", ipam.ErrInvalidConfig, err)
	}
	var out []netip.Addr
	for _, ipc := range res.IPs {
		if a, ok := netip.AddrFromSlice(ipc.Address.IP); ok {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}

func (p *Plugin) gc(args *skel.CmdArgs, cfg *ipam.Config) error {
	attachments, err := gcAttachments(args.StdinData)
	if err != nil {
		return err
	}
	ctx, s, err := p.open(cfg)
	if err != nil {
		return err
	}
	defer s.close()
	valid := make([]allocator.Owner, 0, len(attachments))
	for _, a := range attachments {
		valid = append(valid, allocator.Owner{ContainerID: a.ContainerID, IfName: a.IfName})
	}
	released, err := s.alloc.GC(ctx, s.cfg, valid)
	for _, al := range released {
		s.log.Info("Garbage-collected", "containerID", al.Owner.ContainerID, "ifName", al.Owner.IfName, "pool", al.Pool, "address", al.Addr)
	}
	return err
}

func (p *Plugin) status(args *skel.CmdArgs, cfg *ipam.Config) error {
	ctx, s, err := p.open(cfg)
	if err != nil {
		return err
	}
	defer s.close()
	return s.alloc.Status(ctx, s.cfg)
}
