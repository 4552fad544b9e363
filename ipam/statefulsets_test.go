package ipam

import (
	"errors"
	"strings"
	"testing"
)

func TestLoadStatefulSets(t *testing.T) {
	tests := []struct {
		name    string
		field   string
		want    string
		set     bool
		wantErr string
	}{
		{name: "unset is None, not stated", want: StatefulSetsNone},
		{name: "Sticky", field: `,"statefulSets":"Sticky"`, want: StatefulSetsSticky, set: true},
		{name: "None, stated", field: `,"statefulSets":"None"`, want: StatefulSetsNone, set: true},
		{name: "lowercase", field: `,"statefulSets":"sticky"`,
			wantErr: `invalid IPAM config: statefulSets "sticky": want "Sticky" (a StatefulSet pod keeps its address by ordinal) or "None"`},
		{name: "empty", field: `,"statefulSets":""`, wantErr: `invalid IPAM config: statefulSets: want "Sticky"`},
		{name: "long value is cut", field: `,"statefulSets":"` + strings.Repeat("x", 100) + `"`,
			wantErr: `statefulSets "xxxxxxxxxxxxxxxx...": want "Sticky"`},
		{name: "not a string", field: `,"statefulSets":true`,
			wantErr: "cannot unmarshal bool into Go struct field wireIPAM.statefulSets of type string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(netConf(`{"type":"netpool","range":"10.0.0.0/24"`+tt.field+`}`), "", nil)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want an invalid-config error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.StatefulSets != tt.want || c.StatefulSetsSet != tt.set || c.Sticky() != (tt.want == StatefulSetsSticky) {
				t.Fatalf("StatefulSets = %q (set %v), want %q (set %v)", c.StatefulSets, c.StatefulSetsSet, tt.want, tt.set)
			}
		})
	}
}
