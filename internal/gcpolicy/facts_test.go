package gcpolicy

import "testing"

func TestSplitPodRef(t *testing.T) {
	for ref, want := range map[string]bool{"ns/web": true, "": false, "web": false, "/web": false, "ns/": false} {
		if _, _, ok := SplitPodRef(ref); ok != want {
			t.Errorf("SplitPodRef(%q) ok = %v, want %v", ref, ok, want)
		}
	}
}
