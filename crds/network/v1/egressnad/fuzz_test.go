package egressnad

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecode checks that any input decodes or fails without panicking, and that whatever decodes
// survives a round trip unchanged.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{writtenJSON, `{`, `null`, `[]`, `{"interface":null,"redirect":null}`,
		`{"redirect":{"rules":[{"port":80,"targetPort":81}]}}`, `{"addresses":[null]}`, `{"mode":"Redirect"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			return
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal of a decoded config: %v", err)
		}
		again, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode of %s: %v", b, err)
		}
		if !reflect.DeepEqual(normalize(again), normalize(c)) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", c, again)
		}
	})
}

// normalize maps the empty forms JSON cannot tell apart (a nil and an empty list) onto one.
func normalize(c *Config) *Config {
	n := *c
	if len(n.Addresses) == 0 {
		n.Addresses = nil
	}
	if n.Redirect != nil {
		r := *n.Redirect
		if len(r.Rules) == 0 {
			r.Rules = nil
		}
		n.Redirect = &r
	}
	return &n
}
