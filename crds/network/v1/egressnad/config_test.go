package egressnad

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func port(n int32) *int32 { return &n }

// written is a config as the reconciler writes it: every rule with its targetPort, the fallback
// set, and (Redirect being the default) no mode.
var written = Config{
	CNIVersion: "1.1.0", Name: "egress-router-redirect", Type: PluginType,
	Interface:        &Interface{Type: "macvlan", Master: "", Mode: "bridge", MTU: 0},
	ClusterInterface: "eth0",
	Addresses: []Address{
		{IP: "192.168.12.99/24", Gateway: "192.168.12.1"},
		{IP: "fd00:12::99/64", Gateway: "fd00:12::1"},
	},
	Redirect: &Redirect{
		Rules: []Rule{
			{DestinationIP: "10.0.0.99", Port: 80, Protocol: "UDP", TargetPort: port(80)},
			{DestinationIP: "203.0.113.26", Port: 8080, Protocol: "TCP", TargetPort: port(80)},
		},
		FallbackIP: "203.0.113.30",
	},
	MACSeed: "default/egress-router-redirect",
}

// writtenJSON is written's JSON, byte for byte: the NADs of existing routers hold exactly this
// shape, and their pods' config hashes cover it.
const writtenJSON = `{"cniVersion":"1.1.0","name":"egress-router-redirect","type":"netpool-egress-router",` +
	`"interface":{"type":"macvlan","master":"","mode":"bridge","mtu":0},"clusterInterface":"eth0",` +
	`"addresses":[{"ip":"192.168.12.99/24","gateway":"192.168.12.1"},{"ip":"fd00:12::99/64","gateway":"fd00:12::1"}],` +
	`"redirect":{"rules":[{"destinationIP":"10.0.0.99","port":80,"protocol":"UDP","targetPort":80},` +
	`{"destinationIP":"203.0.113.26","port":8080,"protocol":"TCP","targetPort":80}],"fallbackIP":"203.0.113.30"},` +
	`"macSeed":"default/egress-router-redirect"}`

func TestRoundTrip(t *testing.T) {
	b, err := json.Marshal(&written)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != writtenJSON {
		t.Errorf("Marshal =\n%s\nwant\n%s", b, writtenJSON)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, &written) {
		t.Errorf("Decode(Marshal(c)) = %+v\nwant %+v", got, &written)
	}
	if got.RouterMode() != ModeRedirect {
		t.Errorf("RouterMode of a config without mode = %q, want %q", got.RouterMode(), ModeRedirect)
	}
}

func TestModeRoundTrip(t *testing.T) {
	c := written
	c.Mode = "HTTPProxy"
	b, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"type":"netpool-egress-router","mode":"HTTPProxy","interface"`) {
		t.Errorf("a mode is written after type: %s", b)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.RouterMode() != "HTTPProxy" {
		t.Errorf("RouterMode = %q, want the written HTTPProxy (the plugin refuses it, not the decoder)", got.RouterMode())
	}
}

// TestDecodeMinimal reads a hand-written config: absent parts stay nil, targetPort absent is nil,
// and the runtime's own top-level fields are accepted.
func TestDecodeMinimal(t *testing.T) {
	got, err := Decode([]byte(`{"cniVersion":"1.0.0","name":"n","type":"netpool-egress-router",
		"runtimeConfig":{"x":1},"args":{"cni":{}},"prevResult":{"cniVersion":"1.0.0"},
		"addresses":[{"ip":"192.0.2.5/24","gateway":"192.0.2.1"}],
		"redirect":{"rules":[{"destinationIP":"192.0.2.9","port":443,"protocol":"tcp"}]},"interface":null}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{CNIVersion: "1.0.0", Name: "n", Type: PluginType,
		Addresses: []Address{{IP: "192.0.2.5/24", Gateway: "192.0.2.1"}},
		Redirect:  &Redirect{Rules: []Rule{{DestinationIP: "192.0.2.9", Port: 443, Protocol: "tcp"}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Decode = %+v\nwant %+v", got, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ name, conf, want string }{
		{"not JSON", `{`, "unexpected end of JSON input"},
		{"not an object", `[]`, "cannot unmarshal array"},
		{"unknown interface field", `{"interface":{"typ":"macvlan"}}`, `interface: json: unknown field "typ"`},
		{"unknown address field", `{"addresses":[{"ip":"192.0.2.5/24","gw":"192.0.2.1"}]}`, `addresses: json: unknown field "gw"`},
		{"unknown redirect field", `{"redirect":{"rule":[]}}`, `redirect: json: unknown field "rule"`},
		{"unknown rule field", `{"redirect":{"rules":[{"destinationIP":"192.0.2.9","port":80,"target":81}]}}`, `redirect: json: unknown field "target"`},
		{"mtu not a number", `{"interface":{"mtu":"1400"}}`, "cannot unmarshal string"},
		{"port beyond int32", `{"redirect":{"rules":[{"port":4294967296}]}}`, "cannot unmarshal number 4294967296"},
		{"addresses not a list", `{"addresses":{"ip":"192.0.2.5/24"}}`, "cannot unmarshal object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode([]byte(tc.conf))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode(%s) = %+v, %v; want an error containing %q", tc.conf, c, err, tc.want)
			}
		})
	}
}
