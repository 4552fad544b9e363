package ipam

import (
	"errors"
	"strings"
	"testing"
)

func TestLoadAllowPersistentIPs(t *testing.T) {
	tests := []struct {
		name    string
		ipam    string
		want    bool
		wantErr string
	}{
		{name: "unset", ipam: `{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24"}`},
		{name: "false", ipam: `{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24","allowPersistentIPs":false}`},
		{name: "true with datastore kubernetes", want: true,
			ipam: `{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24","allowPersistentIPs":true}`},
		{name: "true with a pool reference", want: true,
			ipam: `{"type":"netpool","datastore":"kubernetes","pool":"vms","allowPersistentIPs":true}`},
		{name: "false with bbolt", ipam: `{"type":"netpool","range":"10.0.0.0/24","allowPersistentIPs":false}`},
		{name: "true with bbolt", ipam: `{"type":"netpool","range":"10.0.0.0/24","allowPersistentIPs":true}`,
			wantErr: `invalid IPAM config: allowPersistentIPs "true": needs datastore "kubernetes": IPAMClaims live in the Kubernetes API`},
		{name: "not a boolean", ipam: `{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24","allowPersistentIPs":"yes"}`,
			wantErr: "cannot unmarshal string into Go struct field wireIPAM.allowPersistentIPs of type bool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(netConf(tt.ipam), "", nil)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want an invalid-config error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.AllowPersistentIPs != tt.want {
				t.Fatalf("AllowPersistentIPs = %v, want %v", c.AllowPersistentIPs, tt.want)
			}
		})
	}
}

// TestLoadAllowPersistentIPsTopLevel: OVN-Kubernetes and KubeVirt's ipam-extensions read
// allowPersistentIPs at the network config's top level; a bridge or macvlan plugin passes its whole
// config to IPAM, so netpool reads it there too, and refuses the two places disagreeing.
func TestLoadAllowPersistentIPsTopLevel(t *testing.T) {
	const k8s = `{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24"`
	conf := func(top, ipam string) []byte {
		return []byte(`{"cniVersion":"1.0.0","name":"vm-net","type":"bridge"` + top + `,"ipam":` + ipam + `}`)
	}
	tests := []struct {
		name      string
		top, ipam string
		want      bool
		wantErr   string
	}{
		{name: "top level only", top: `,"allowPersistentIPs":true`, ipam: k8s + `}`, want: true},
		{name: "top level false", top: `,"allowPersistentIPs":false`, ipam: k8s + `}`},
		{name: "both true", top: `,"allowPersistentIPs":true`, ipam: k8s + `,"allowPersistentIPs":true}`, want: true},
		{name: "ipam only", ipam: k8s + `,"allowPersistentIPs":true}`, want: true},
		{name: "top false, ipam true", top: `,"allowPersistentIPs":false`, ipam: k8s + `,"allowPersistentIPs":true}`,
			wantErr: `allowPersistentIPs: is false at the network config's top level but true in its ipam section`},
		{name: "top true, ipam false", top: `,"allowPersistentIPs":true`, ipam: k8s + `,"allowPersistentIPs":false}`,
			wantErr: `is true at the network config's top level but false in its ipam section`},
		{name: "top level with bbolt", top: `,"allowPersistentIPs":true`, ipam: `{"type":"netpool","range":"10.0.0.0/24"}`,
			wantErr: `allowPersistentIPs "true": needs datastore "kubernetes"`},
		{name: "top level not a boolean", top: `,"allowPersistentIPs":"true"`, ipam: k8s + `}`,
			wantErr: "cannot unmarshal string into Go struct field wireNet.allowPersistentIPs of type bool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(conf(tt.top, tt.ipam), "", nil)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want an invalid-config error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.AllowPersistentIPs != tt.want {
				t.Fatalf("AllowPersistentIPs = %v, want %v", c.AllowPersistentIPs, tt.want)
			}
		})
	}
}

// TestFromNetworkConfigAllowPersistentIPs: the controller reads a NAD as the plugin will: the flag
// of the plugin config around the ipam section counts, in a single config and in a conflist's
// plugin; a conflist's own top level does not reach its plugins (libcni passes each plugin only its
// own object), so it does not count there.
func TestFromNetworkConfigAllowPersistentIPs(t *testing.T) {
	const ipam = `{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24"}`
	tests := []struct {
		name, doc string
		want      bool
	}{
		{name: "single config, top level", want: true,
			doc: `{"cniVersion":"1.0.0","name":"vm-net","type":"bridge","allowPersistentIPs":true,"ipam":` + ipam + `}`},
		{name: "conflist plugin", want: true,
			doc: `{"cniVersion":"1.0.0","name":"vm-net","plugins":[{"type":"bridge","allowPersistentIPs":true,"ipam":` + ipam + `}]}`},
		{name: "conflist top level only",
			doc: `{"cniVersion":"1.0.0","name":"vm-net","allowPersistentIPs":true,"plugins":[{"type":"bridge","ipam":` + ipam + `}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromNetworkConfig([]byte(tt.doc))
			if err != nil || len(got) != 1 {
				t.Fatalf("sections %v, %v; want one", got, err)
			}
			if got[0].Config.AllowPersistentIPs != tt.want {
				t.Fatalf("AllowPersistentIPs = %v, want %v", got[0].Config.AllowPersistentIPs, tt.want)
			}
		})
	}
	if _, err := FromNetworkConfig([]byte(`{"name":"n","type":"bridge","allowPersistentIPs":false,"ipam":` +
		`{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24","allowPersistentIPs":true}}`)); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a NAD whose flags disagree: %v, want the plugin's config error", err)
	}
}
