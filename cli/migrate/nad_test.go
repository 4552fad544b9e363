package migrate

import (
	"net/netip"
	"strings"
	"testing"
)

func TestWhereaboutsSections(t *testing.T) {
	conflist := `{"cniVersion":"1.0.0","name":"n","plugins":[
		{"type":"macvlan","ipam":{"type":"whereabouts","range":"10.1.0.0/24","network_name":"blue","exclude":["10.1.0.0/28"]}},
		{"type":"bridge","ipam":{"type":"netpool","range":"10.2.0.0/24"}},
		{"type":"tuning"}]}`
	got, err := whereaboutsSections([]byte(conflist))
	if err != nil {
		t.Fatal(err)
	}
	// The section that already says netpool comes back too, marked: a NAD switched before is verified.
	if len(got) != 2 || !got[1].Switched || got[1].Path != "plugins[1].ipam" || got[0].Switched {
		t.Fatalf("sections %+v, want the whereabouts one and the switched one", got)
	}
	got = got[:1]
	if len(got) != 1 || got[0].Path != "plugins[0].ipam" || got[0].Config.NetworkName != "blue" || got[0].Config.Name != "n" ||
		len(got[0].Config.Ranges) != 1 || got[0].Config.Ranges[0].Subnet.String() != "10.1.0.0/24" || got[0].Config.Ranges[0].Contains(netip.MustParseAddr("10.1.0.5")) || !got[0].Config.Ranges[0].Contains(netip.MustParseAddr("10.1.0.16")) {
		t.Fatalf("sections %+v", got)
	}
	k3s := "/var/lib/rancher/k3s/agent/etc/cni/net.d/whereabouts.d/whereabouts.conf"
	if got, err := whereaboutsSections([]byte(`{"name":"n","ipam":{"type":"whereabouts","range":"10.4.0.0/24","configuration_path":"` + k3s + `"}}`)); err != nil ||
		len(got) != 1 || got[0].ConfigurationPath != k3s {
		t.Fatalf("configuration_path: %+v, %v", got, err)
	}
	if got, err := whereaboutsSections([]byte(`{"type":"macvlan","ipam":{"type":"host-local"}}`)); err != nil || got != nil {
		t.Fatalf("no whereabouts: %+v, %v", got, err)
	}
	// A whereabouts flat-file setting netpool ignores too is fine; what would hand out wrong
	// addresses is not.
	if got, err := whereaboutsSections([]byte(`{"name":"n","ipam":{"type":"whereabouts","range":"10.3.0.0/24","leader_lease_duration":1500}}`)); err != nil || len(got) != 1 {
		t.Fatalf("leader_lease_duration: %+v, %v", got, err)
	}
	for _, bad := range []struct{ config, want string }{
		{`{"ipam":`, "spec.config is not valid JSON"},
		{`{"name":"n","ipam":{"type":"whereabouts","range":"10.3.0.0/24","node_slice_size":"/26"}}`, "ipam: node_slice_size"},
		{`{"name":"n","ipam":{"type":"whereabouts","range":"10.3.0.0/33"}}`, "ipam"},
		{`{"name":"n","ipam":{"type":"whereabouts","rnage":"10.3.0.0/24"}}`, `"rnage": unknown field`},
		{`{"name":"n","ipam":{"type":"whereabouts","range":"10.3.0.0/24"},"x":"` + strings.Repeat("a", maxNADConfig) + `"}`, "more than the"},
	} {
		if _, err := whereaboutsSections([]byte(bad.config)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%.80s: %v, want %q", bad.config, err, bad.want)
		}
	}
}

// FuzzWhereaboutsSections: any config gives sections or an error, never a panic, and every
// section is one netpool loads.
func FuzzWhereaboutsSections(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"n","type":"macvlan","ipam":{"type":"whereabouts","range":"10.1.0.0/24"}}`))
	f.Add([]byte(`{"plugins":[{"ipam":{"type":"whereabouts","ipRanges":[{"range":"fd00::/64"}],"network_name":"x"}}]}`))
	f.Add([]byte(`{"delegates":[{"ipam":{"type":"whereabouts","node_slice_size":"/28"}}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := whereaboutsSections(data)
		if err != nil {
			return
		}
		for _, s := range got {
			if s.Config == nil || len(s.Config.Ranges) == 0 || !strings.HasSuffix(s.Path, "ipam") || s.Config.Datastore == "" {
				t.Fatalf("section %+v", s)
			}
		}
	})
}
