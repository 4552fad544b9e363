package ipam

import (
	"errors"
	"strings"
	"testing"
)

func TestFromNetworkConfig(t *testing.T) {
	tests := []struct {
		name      string
		config    string
		wantPaths []string
		wantError string
	}{
		{name: "single plugin", config: `{"cniVersion":"1.0.0","name":"a","type":"macvlan","ipam":{"type":"netpool","range":"10.0.0.0/24"}}`, wantPaths: []string{"ipam"}},
		{name: "conflist", config: `{"cniVersion":"1.0.0","name":"a","plugins":[{"type":"bridge","ipam":{"type":"netpool","range":"10.0.0.0/24"}},{"type":"tuning"}]}`, wantPaths: []string{"plugins[0].ipam"}},
		{name: "nested delegates", config: `{"cniVersion":"1.0.0","name":"a","plugins":[{"type":"meta","delegates":[{"type":"x","ipam":{"type":"netpool","range":"10.1.0.0/24"}}]},{"type":"bridge","ipam":{"type":"netpool","range":"10.2.0.0/24"}}]}`, wantPaths: []string{"plugins[0].delegates[0].ipam", "plugins[1].ipam"}},
		{name: "other IPAM only", config: `{"cniVersion":"1.0.0","name":"a","type":"bridge","ipam":{"type":"host-local","subnet":"10.0.0.0/24"}}`},
		{name: "not JSON", config: `{"plugins":`, wantError: "config: not valid JSON"},
		{name: "not an object", config: `[1,2]`, wantError: "config: must be a JSON object"},
		{name: "bad netpool section", config: `{"cniVersion":"1.0.0","name":"a","plugins":[{"type":"bridge","ipam":{"type":"netpool","range":"10.0.0.0/33"}}]}`, wantError: `plugins[0].ipam: invalid IPAM config: ipam.range "10.0.0.0/33": not a CIDR`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromNetworkConfig([]byte(tt.config))
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) || !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("error = %v, want ErrInvalidConfig containing %q", err, tt.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, s := range got {
				paths = append(paths, s.Path)
				if s.Config.Name != "a" || s.Config.CNIVersion != "1.0.0" {
					t.Errorf("%s: name/version = %q/%q", s.Path, s.Config.Name, s.Config.CNIVersion)
				}
			}
			if strings.Join(paths, ",") != strings.Join(tt.wantPaths, ",") {
				t.Errorf("paths = %v, want %v", paths, tt.wantPaths)
			}
		})
	}
}

// FuzzFromNetworkConfig checks the NAD walker never panics and only fails with config errors.
func FuzzFromNetworkConfig(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"a","plugins":[{"type":"bridge","ipam":{"type":"netpool","range":"10.0.0.0/24"}}]}`))
	f.Add([]byte(`{"delegates":[{"ipam":{"type":"netpool","ipRanges":[{"range":"fd00::/64"}]}}]}`))
	f.Add([]byte(`{"ipam":{"type":"netpool"}}`))
	f.Add([]byte(`{"name":"a","type":"bridge","allowPersistentIPs":true,"ipam":{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24"}}`))
	f.Add([]byte(`{"plugins":[{"allowPersistentIPs":"x","ipam":{"type":"netpool","range":"10.0.0.0/24"}}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := FromNetworkConfig(raw)
		if err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("untyped error: %v", err)
		}
		for _, s := range got {
			if s.Config == nil || len(s.Config.Ranges) == 0 {
				t.Fatalf("section %s loaded without ranges", s.Path)
			}
		}
	})
}
