package egressrouter

import (
	"errors"
	"testing"
)

// FuzzParse checks that any config either parses into a Router that satisfies its own validation or
// fails with ErrInvalidConfig (code 7), and never panics.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		contractExample, openShiftExample, `{`, `null`, `[]`, `{"name":"x"}`,
		`{"name":"x","addresses":[{"ip":"192.0.2.5/24","gateway":"192.0.2.1"}],"redirect":{"rules":[{"destinationIP":"192.0.2.9","port":80,"protocol":"SCTP"}]}}`,
		`{"name":"x","ip":{"addresses":["fd00::5/64"],"gateway":"fd00::1","destinations":["80 tcp fd00::9 81","fd00::30"]}}`,
		`{"name":"x","interfaceArgs":{"mtu":"9000","mode":"VEPA"},"ip":{"addresses":["192.0.2.5/24"],"gateway":"192.0.2.1"}}`,
		`{"name":"x","addresses":[{"ip":"192.0.2.5/24","gateway":"192.0.2.1"}],"interface":{"mode":"passthru","mtu":1e9}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, stdin []byte) {
		r, err := Parse(stdin)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if err := r.validate(); err != nil {
			t.Fatalf("parsed router fails its own validation: %v", err)
		}
		rd, ok := r.Mode.(*Redirect)
		if !ok || len(rd.Rules) > MaxRules || len(r.Addresses) > 2 {
			t.Fatalf("parsed router exceeds the bounds: mode %T, %d addresses", r.Mode, len(r.Addresses))
		}
		_ = chains(r, "net1") // building the nftables table must not panic either
	})
}

// FuzzParseDestination checks OpenShift's destination strings: a rule, a fallback or an error.
func FuzzParseDestination(f *testing.F) {
	for _, seed := range []string{"80 UDP 10.0.0.99", "8080 TCP 203.0.113.26 80", "203.0.113.30", "fd00::1/128",
		"9000 sctp fd00::9 9001", "", "80", "80 TCP", "65536 TCP 1.2.3.4", "80 TCP 1.2.3.4 0", "1 2 3 4 5"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rule, fallback, err := ParseDestination(s)
		switch {
		case err != nil:
			if rule != (Rule{}) || fallback.IsValid() {
				t.Fatalf("error %v with a result %+v %v", err, rule, fallback)
			}
		case fallback.IsValid():
			if rule != (Rule{}) || fallback.Is4In6() {
				t.Fatalf("fallback %v with rule %+v", fallback, rule)
			}
		default:
			if rule.Port == 0 || rule.TargetPort == 0 || !rule.Destination.IsValid() || protocols[rule.Protocol] == 0 {
				t.Fatalf("bad rule %+v from %q", rule, s)
			}
		}
	})
}
