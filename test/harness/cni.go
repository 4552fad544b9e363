package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
)

// CNIVersion is the spec version of the conflists the harness writes: 1.1.0, the first with GC and STATUS.
const CNIVersion = "1.1.0"

// BridgeConflist returns a conflist with one bridge plugin (bridge is the Linux bridge name, the
// bridge holds the gateway address) delegating to the given IPAM section.
func BridgeConflist(network, bridge string, ipam map[string]any) ([]byte, error) {
	return conflist(network, map[string]any{
		"type":      "bridge",
		"bridge":    bridge,
		"isGateway": true,
		"ipam":      ipam,
	})
}

// MacvlanConflist returns a conflist with one macvlan plugin in bridge mode on master, delegating
// to the given IPAM section.
func MacvlanConflist(network, master string, ipam map[string]any) ([]byte, error) {
	return conflist(network, map[string]any{
		"type":   "macvlan",
		"master": master,
		"mode":   "bridge",
		"ipam":   ipam,
	})
}

func conflist(network string, plugin map[string]any) ([]byte, error) {
	return json.Marshal(map[string]any{
		"cniVersion": CNIVersion,
		"name":       network,
		"plugins":    []any{plugin},
	})
}

// Network drives one conflist through libcni. Every call runs inside the Host namespace, so the
// plugins create their bridges and find their macvlan masters there, never in the machine's own
// namespace.
type Network struct {
	CNI  *libcni.CNIConfig
	List *libcni.NetworkConfigList
	Host ns.NetNS
}

// NewNetwork parses conflist and prepares to run its plugins from binDir. cacheDir is libcni's
// result cache; give each network its own so that runs never see each other's attachments.
func NewNetwork(binDir, cacheDir string, host ns.NetNS, conflist []byte) (*Network, error) {
	list, err := libcni.NetworkConfFromBytes(conflist)
	if err != nil {
		return nil, fmt.Errorf("failed to parse conflist: %w", err)
	}
	return &Network{
		CNI:  libcni.NewCNIConfigWithCacheDir([]string{binDir}, cacheDir, nil),
		List: list,
		Host: host,
	}, nil
}

// Attachment describes the interface ifName of container containerID in netns.
func Attachment(containerID string, netns ns.NetNS, ifName string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: containerID, NetNS: netns.Path(), IfName: ifName}
}

// Add runs ADD and returns the result in the current (1.x) result format.
func (n *Network) Add(ctx context.Context, rt *libcni.RuntimeConf) (*current.Result, error) {
	var res *current.Result
	err := n.Host.Do(func(ns.NetNS) error {
		r, err := n.CNI.AddNetworkList(ctx, n.List, rt)
		if err != nil {
			return err
		}
		res, err = current.NewResultFromResult(r)
		return err
	})
	return res, err
}

// Check runs CHECK against the result cached by Add.
func (n *Network) Check(ctx context.Context, rt *libcni.RuntimeConf) error {
	return n.Host.Do(func(ns.NetNS) error { return n.CNI.CheckNetworkList(ctx, n.List, rt) })
}

// Del runs DEL.
func (n *Network) Del(ctx context.Context, rt *libcni.RuntimeConf) error {
	return n.Host.Do(func(ns.NetNS) error { return n.CNI.DelNetworkList(ctx, n.List, rt) })
}

// Status runs STATUS on every plugin of the list.
func (n *Network) Status(ctx context.Context) error {
	return n.Host.Do(func(ns.NetNS) error { return n.CNI.GetStatusNetworkList(ctx, n.List) })
}

// GC runs libcni's GC: DEL for every attachment in its cache that valid does not list, then GC on
// each plugin of the list.
func (n *Network) GC(ctx context.Context, valid []types.GCAttachment) error {
	return n.Host.Do(func(ns.NetNS) error {
		return n.CNI.GCNetworkList(ctx, n.List, &libcni.GCArgs{ValidAttachments: valid})
	})
}

// GCIPAM sends GC straight to the IPAM plugin of each plugin in the list, with the plugin's config
// and valid injected the way libcni injects it. This is the GC an IPAM plugin would get from its
// main plugin, but bridge and macvlan (containernetworking/plugins v1.10) do not forward GC to
// their IPAM plugin yet ("FIXME GC" in their main), so netpool's GC is reachable only this way.
func (n *Network) GCIPAM(ctx context.Context, valid []types.GCAttachment) error {
	if valid == nil {
		valid = []types.GCAttachment{} // an empty list, not null: "nothing is valid"
	}
	for _, plugin := range n.List.Plugins {
		var conf struct {
			IPAM struct {
				Type string `json:"type"`
			} `json:"ipam"`
		}
		if err := json.Unmarshal(plugin.Bytes, &conf); err != nil {
			return fmt.Errorf("failed to parse plugin %s config: %w", plugin.Network.Type, err)
		}
		if conf.IPAM.Type == "" {
			continue
		}
		gcConf, err := libcni.InjectConf(plugin, map[string]any{
			"name":                      n.List.Name,
			"cniVersion":                n.List.CNIVersion,
			"cni.dev/valid-attachments": valid,
			"cni.dev/attachments":       valid, // the spec's original, misspelt key; libcni sends both
		})
		if err != nil {
			return fmt.Errorf("failed to build GC config for %s: %w", conf.IPAM.Type, err)
		}
		pluginPath, err := invoke.FindInPath(conf.IPAM.Type, n.CNI.Path)
		if err != nil {
			return err
		}
		args := &invoke.Args{Command: "GC", Path: strings.Join(n.CNI.Path, ":")}
		err = n.Host.Do(func(ns.NetNS) error {
			return invoke.ExecPluginWithoutResult(ctx, pluginPath, gcConf.Bytes, args, nil)
		})
		if err != nil {
			return fmt.Errorf("GC of %s failed: %w", conf.IPAM.Type, err)
		}
	}
	return nil
}
