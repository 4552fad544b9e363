package version

import (
	"runtime/debug"
	"testing"
)

func TestStringPrefersTheLinkerValue(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v1.2.3-4-gabcdef0"
	if got := String(); got != "v1.2.3-4-gabcdef0" {
		t.Errorf("String() = %q, want the value the linker set", got)
	}
	if got := Line("netpool"); got != "netpool v1.2.3-4-gabcdef0" {
		t.Errorf("Line() = %q", got)
	}
}

func TestFromBuildInfo(t *testing.T) {
	for _, tt := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "devel"},
		{"devel main module", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "devel"},
		{"empty main version", &debug.BuildInfo{}, true, "devel"},
		{"stamped from the VCS", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201095400-fa41963abcde+dirty"}}, true,
			"v0.0.0-20261201095400-fa41963abcde+dirty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(tt.bi, tt.ok); got != tt.want {
				t.Errorf("fromBuildInfo() = %q, want %q", got, tt.want)
			}
		})
	}
}
