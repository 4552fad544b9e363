package migrate

import (
	"strings"
	"testing"
)

// TestSwitchConfig: the switch changes the type of each whereabouts section named, and no other
// byte of spec.config (spacing, key order, numbers and the other plugins stay as written).
func TestSwitchConfig(t *testing.T) {
	conflist := `{
  "cniVersion": "1.0.0", "name": "n",
  "plugins": [
    {"type": "macvlan", "master": "eth1", "mtu": 1.50e3,
     "ipam": { "range": "10.1.0.0/24", "type" :  "whereabouts", "network_name": "blue" }},
    {"type": "tuning", "ipam": {"type": "whereabouts", "range": "10.2.0.0/24"}},
    {"type":"bridge","ipam":{"type":"netpool","range":"10.3.0.0/24"}}
  ]
}`
	got, err := switchConfig([]byte(conflist), []string{"plugins[0].ipam", "plugins[1].ipam"})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(strings.Replace(conflist, `"type" :  "whereabouts"`, `"type" :  "netpool"`, 1),
		`{"type": "whereabouts", "range": "10.2.0.0/24"}`, `{"type": "netpool", "range": "10.2.0.0/24"}`, 1)
	if string(got) != want {
		t.Fatalf("switched:\n%s\nwant:\n%s", got, want)
	}
	// One section of two: the other stays whereabouts.
	one, err := switchConfig([]byte(conflist), []string{"plugins[1].ipam"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(one), `"whereabouts"`) != 1 || !strings.Contains(string(one), `{"type": "netpool", "range": "10.2.0.0/24"}`) {
		t.Fatalf("one section switched: %s", one)
	}
	// A key "type" elsewhere (the plugin's own) is never touched.
	plain := `{"name":"n","type":"macvlan","ipam":{"type":"whereabouts","range":"10.1.0.0/24"}}`
	if got, err := switchConfig([]byte(plain), []string{"ipam"}); err != nil || string(got) != strings.Replace(plain, `"ipam":{"type":"whereabouts"`, `"ipam":{"type":"netpool"`, 1) {
		t.Fatalf("plain: %s, %v", got, err)
	}
	for _, bad := range []struct {
		config string
		paths  []string
		want   string
	}{
		{`{"ipam":{"type":"netpool"}}`, []string{"ipam"}, "no whereabouts section at ipam"},
		{`{"ipam":{"type":"whereabouts"}`, []string{"ipam"}, "spec.config"},
		{`{"ipam":{"type":"whereabouts"}} {}`, []string{"ipam"}, "data after the top-level value"},
		{`{"ipam":{"type":{"x":1}}}`, []string{"ipam"}, "ipam.type is not a string"},
	} {
		if _, err := switchConfig([]byte(bad.config), bad.paths); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("switchConfig(%s) = %v, want %q", bad.config, err, bad.want)
		}
	}
}

// FuzzSwitchConfig: any config gives an error or one that netpool reads with no whereabouts
// section at the switched paths, never a panic.
func FuzzSwitchConfig(f *testing.F) {
	f.Add(`{"name":"n","ipam":{"type":"whereabouts","range":"10.1.0.0/24"}}`, "ipam")
	f.Add(`{"plugins":[{"ipam":{"type":"whereabouts","range":"10.1.0.0/24"}}]}`, "plugins[0].ipam")
	f.Add(`{"ipam":{"type":"whereabouts","type":"whereabouts"}}`, "ipam")
	f.Fuzz(func(t *testing.T, config, path string) {
		out, err := switchConfig([]byte(config), []string{path})
		if err != nil {
			return
		}
		sections, err := whereaboutsSections(out)
		if err != nil {
			t.Fatalf("switched config does not load: %v", err)
		}
		for _, s := range sections {
			if s.Path == path && !s.Switched {
				t.Fatalf("%s still says whereabouts: %s", path, out)
			}
		}
	})
}
