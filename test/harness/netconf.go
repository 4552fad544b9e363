package harness

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
)

// NetpoolIPAM returns a netpool IPAM section on the bbolt file dbPath, with fields (range,
// range_start, gateway, ...) added; a "lock_timeout" field goes into the bbolt section.
func NetpoolIPAM(dbPath string, fields map[string]any) map[string]any {
	bbolt := map[string]any{"path": dbPath}
	ipam := map[string]any{"type": "netpool", "datastore": "bbolt", "bbolt": bbolt}
	for k, v := range fields {
		if k == "lock_timeout" {
			bbolt[k] = v
			continue
		}
		ipam[k] = v
	}
	return ipam
}

// HostLocalIPAM returns a host-local IPAM section handing out subnet, with its state in dataDir.
func HostLocalIPAM(dataDir, subnet string) map[string]any {
	return map[string]any{
		"type":    "host-local",
		"ranges":  []any{[]any{map[string]any{"subnet": subnet}}},
		"dataDir": dataDir,
	}
}

// NetConf returns the network configuration an IPAM plugin reads on stdin: the network name, the
// spec version and the ipam section.
func NetConf(network string, ipam map[string]any) ([]byte, error) {
	return marshalConf(map[string]any{"cniVersion": CNIVersion, "name": network, "ipam": ipam})
}

// GCNetConf is NetConf for GC: it adds the attachments that are still valid under both keys
// libcni sends (the spec's "cni.dev/valid-attachments" and its original "cni.dev/attachments").
func GCNetConf(network string, ipam map[string]any, valid []types.GCAttachment) ([]byte, error) {
	if valid == nil {
		valid = []types.GCAttachment{} // an empty list, not null: "nothing is valid"
	}
	return marshalConf(map[string]any{
		"cniVersion": CNIVersion, "name": network, "ipam": ipam,
		"cni.dev/valid-attachments": valid,
		"cni.dev/attachments":       valid,
	})
}

func marshalConf(conf map[string]any) ([]byte, error) {
	b, err := json.Marshal(conf)
	if err != nil {
		return nil, fmt.Errorf("failed to encode network config: %w", err)
	}
	return b, nil
}
