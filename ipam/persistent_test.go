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
