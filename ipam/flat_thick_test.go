package ipam

import (
	"fmt"
	"io/fs"
	"testing"
)

// TestFlatFileThickMultus: under Multus' thick daemon the host's /etc/cni/net.d is at
// /host/etc/cni/net.d, so the flat file is found there; on the host its own path wins, and a
// whereabouts file never shadows netpool's.
func TestFlatFileThickMultus(t *testing.T) {
	const (
		host  = "/etc/cni/net.d/netpool.d/netpool.conf"
		thick = "/host/etc/cni/net.d/netpool.d/netpool.conf"
		wh    = "/etc/cni/net.d/whereabouts.d/whereabouts.conf"
	)
	for _, tc := range []struct {
		name     string
		files    map[string]string
		wantPath string
	}{
		{"thick only", map[string]string{thick: `{"bbolt":{"path":"/thick.db"}}`}, "/thick.db"},
		{"host path first", map[string]string{host: `{"bbolt":{"path":"/host.db"}}`, thick: `{"bbolt":{"path":"/thick.db"}}`}, "/host.db"},
		{"netpool's thick file before whereabouts'", map[string]string{thick: `{"bbolt":{"path":"/thick.db"}}`, wh: `{"bbolt":{"path":"/wh.db"}}`}, "/thick.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func(p string) ([]byte, error) {
				if s, ok := tc.files[p]; ok {
					return []byte(s), nil
				}
				return nil, fmt.Errorf("open %s: %w", p, fs.ErrNotExist)
			}
			c, err := Load(netConf(`{"type":"netpool","range":"10.1.0.0/24"}`), "", read)
			if err != nil {
				t.Fatal(err)
			}
			if c.BboltPath != tc.wantPath {
				t.Errorf("bbolt path = %s, want %s", c.BboltPath, tc.wantPath)
			}
		})
	}
}
