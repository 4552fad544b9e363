package ipam

import "testing"

func TestInDirs(t *testing.T) {
	dirs := []string{"/etc/cni/net.d", "/var/lib/rancher/k3s/agent/etc/cni/net.d/"}
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"/etc/cni/net.d/whereabouts.d/whereabouts.conf", true},
		{"/etc/cni/net.d", true},
		{"/var/lib/rancher/k3s/agent/etc/cni/net.d/whereabouts.d/whereabouts.conf", true},
		{"/etc/cni/net.d.evil/x", false},
		{"/etc/cni/net.d/../../shadow", false},
		{"/etc/cni//net.d/x", true},
		{"etc/cni/net.d/x", false},
		{"", false},
		{"/var/log/netpool/a.log", false},
	} {
		if got := InDirs(tt.path, dirs); got != tt.want {
			t.Errorf("InDirs(%q) = %t, want %t", tt.path, got, tt.want)
		}
	}
	if !InDirs("/anything", []string{"/"}) {
		t.Error(`"/" holds every absolute path`)
	}
}
