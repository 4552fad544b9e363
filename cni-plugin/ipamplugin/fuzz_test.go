package ipamplugin

import (
	"errors"
	"testing"

	"github.com/netpool/netpool/ipam"
)

// FuzzPrevResult checks that CHECK's prevResult parser either returns addresses or a config error
// (code 7), and never panics, whatever the runtime sends.
func FuzzPrevResult(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.0.0.2/24","gateway":"10.0.0.1"}]}}`,
		`{"cniVersion":"0.3.1","prevResult":{"cniVersion":"0.3.1","ips":[{"version":"6","address":"fd00::2/64"}]}}`,
		`{"cniVersion":"1.1.0","prevResult":{"ips":[{"address":"bogus"}]}}`,
		`{"cniVersion":"1.1.0"}`, `{`, `{"prevResult":7}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, stdin []byte) {
		addrs, err := prevResultAddrs(stdin)
		if err != nil {
			if !errors.Is(err, ipam.ErrInvalidConfig) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		for _, a := range addrs {
			if !a.IsValid() || a.Is4In6() {
				t.Fatalf("parsed address %v is not a plain valid address", a)
			}
		}
	})
}
