package cluster

import (
	"fmt"
	"strings"
)

// hostNetwork makes the three bridges: the cluster bridge with the host's address (the control
// plane listens there), the storage bridge with none (pods reach each other over it through their
// macvlans) and the external bridge with ExternalHostAddr.
func (c *Cluster) hostNetwork() error {
	for _, b := range []struct{ name, addr string }{
		{clusterBridge, hostAddr + "/24"},
		{storageBridge, ""},
		{externalBridge, fmt.Sprintf("%s/%d", ExternalHostAddr, externalPrefix)},
	} {
		if _, err := run("ip", "link", "add", b.name, "type", "bridge"); err != nil {
			if strings.Contains(err.Error(), "File exists") {
				return fmt.Errorf("bridge %s exists: another test cluster runs, or one was killed before it could clean up (ip link del %s): %w", b.name, b.name, err)
			}
			return err
		}
		if b.addr != "" {
			if _, err := run("ip", "addr", "add", b.addr, "dev", b.name); err != nil {
				return err
			}
		}
		if _, err := run("ip", "link", "set", b.name, "up"); err != nil {
			return err
		}
	}
	// OpenShift's documented EgressRouter redirect example, unchanged but for its apiVersion: its
	// router address 192.168.12.99/24 sits on the nodes' default-route interface (eth0, the
	// cluster bridge) with gateway 192.168.12.1, the host; its destinations are the host's on
	// the external bridge.
	for _, a := range []struct{ addr, dev string }{
		{EgressGateway + "/24", clusterBridge},
		{EgressDestinations[0] + "/32", externalBridge},
		{EgressDestinations[1] + "/32", externalBridge},
	} {
		if _, err := run("ip", "addr", "add", a.addr, "dev", a.dev); err != nil {
			return err
		}
	}
	return nil
}

// EgressGateway and EgressDestinations are the host's addresses that OpenShift's EgressRouter
// redirect example names (docs/real-cluster.md).
const EgressGateway = "192.168.12.1"

var EgressDestinations = []string{"203.0.113.26", "203.0.113.27"}

// removeHostNetwork deletes the bridges; the nodes' veths went with their namespaces, and the
// routes to the pod subnets with the cluster bridge.
func removeHostNetwork() error {
	var errs []string
	for _, b := range []string{clusterBridge, storageBridge, externalBridge} {
		if _, err := run("ip", "link", "show", b); err != nil {
			continue
		}
		if _, err := run("ip", "link", "del", b); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("failed to delete bridges: %s", strings.Join(errs, "; "))
	}
	return nil
}
