package ipamplugin

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netpool/netpool/ipam"
)

// GC's arguments: the spec's key, and the older misspelt one that libcni also sends.
const (
	keyValidAttachments  = "cni.dev/valid-attachments"
	keyLegacyAttachments = "cni.dev/attachments"
)

// gcAttachments returns the attachments a GC call lists as valid. GC releases every allocation of
// the network that is not listed, so only an explicit list may do that: a config with neither key
// (or with null) is an error, not "nothing is valid", and [] is the one way to release all.
func gcAttachments(stdin []byte) ([]types.GCAttachment, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(stdin, &raw); err != nil {
		return nil, fmt.Errorf("%w: failed to parse GC arguments: %w", ipam.ErrInvalidConfig, err)
	}
	var out []types.GCAttachment
	found := false
	for _, key := range []string{keyValidAttachments, keyLegacyAttachments} {
		v, ok := raw[key]
		if !ok {
			continue
		}
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return nil, fmt.Errorf("%w: failed to parse GC arguments: %q is null; list the valid attachments, or pass [] to release every allocation of the network", ipam.ErrInvalidConfig, key)
		}
		var list []types.GCAttachment
		if err := json.Unmarshal(v, &list); err != nil {
			return nil, fmt.Errorf("%w: failed to parse GC arguments: %q: %w", ipam.ErrInvalidConfig, key, err)
		}
		out = append(out, list...)
		found = true
	}
	if !found {
		return nil, fmt.Errorf("%w: GC needs %q: list the valid attachments, or pass [] to release every allocation of the network", ipam.ErrInvalidConfig, keyValidAttachments)
	}
	return out, nil
}
