package ipamplugin

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// TestExclusionLimitInTheEmbeddedStore: a config whose exclusions exceed the one limit of the pool
// model (256 CIDRs) is refused with code 7 by the embedded store as by Kubernetes mode, and the
// refused ADD does not even create the database.
func TestExclusionLimitInTheEmbeddedStore(t *testing.T) {
	h := newHarness(t)
	f := h.plugin.Funcs()
	ex := make([]string, 257)
	for i := range ex {
		ex[i] = fmt.Sprintf(`"10.6.%d.%d"`, i/100, 2*(i%100)+1)
	}
	err := h.run(f.Add, "c1", h.conf(`,"range":"10.6.0.0/16","exclude":[`+strings.Join(ex, ",")+`]`, ""))
	wantCode(t, err, types.ErrInvalidNetworkConfig, `ipam.exclude: the exclusions make more than 256 CIDRs once merged and clipped to the window 10.6.0.1-10.6.255.254; at most 256 are allowed`)
	if _, err := os.Stat(h.db); !os.IsNotExist(err) {
		t.Errorf("the database after a refused ADD: %v, want none", err)
	}
	// At the limit the same config serves.
	if err := h.run(f.Add, "c2", h.conf(`,"range":"10.6.0.0/16","exclude":[`+strings.Join(ex[:256], ",")+`]`, "")); err != nil {
		t.Fatalf("ADD with 256 exclusions: %v", err)
	}
}
