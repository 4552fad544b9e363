package ipam

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReuseCooldownLoads(t *testing.T) {
	for _, tt := range []struct {
		name, field string
		want        time.Duration
		set         bool
	}{
		{"unset", ``, 0, false},
		{"30s", `,"reuseCooldown":"30s"`, 30 * time.Second, true},
		{"1h30m", `,"reuseCooldown":"1h30m"`, 90 * time.Minute, true},
		{"0s is off, but stated", `,"reuseCooldown":"0s"`, 0, true},
		{"the lower bound", `,"reuseCooldown":"1s"`, time.Second, true},
		{"the upper bound", `,"reuseCooldown":"168h"`, 168 * time.Hour, true},
		{"0 without a unit", `,"reuseCooldown":"0"`, 0, true},
		{"a fraction", `,"reuseCooldown":"1.5m"`, 90 * time.Second, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load([]byte(`{"name":"n","ipam":{"type":"netpool","range":"10.0.0.0/24"`+tt.field+`}}`), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.ReuseCooldown != tt.want || c.ReuseCooldownSet != tt.set {
				t.Fatalf("ReuseCooldown = %v (set %v), want %v (set %v)", c.ReuseCooldown, c.ReuseCooldownSet, tt.want, tt.set)
			}
		})
	}
}

func TestReuseCooldownFromFlatFile(t *testing.T) {
	flat := func(string) ([]byte, error) { return []byte(`{"reuseCooldown":"2m"}`), nil }
	c, err := Load([]byte(`{"name":"n","ipam":{"type":"netpool","range":"10.0.0.0/24","configuration_path":"/etc/np.conf"}}`), "", flat)
	if err != nil {
		t.Fatal(err)
	}
	if c.ReuseCooldown != 2*time.Minute {
		t.Fatalf("ReuseCooldown = %v, want the flat file's 2m", c.ReuseCooldown)
	}
}

func TestReuseCooldownRejects(t *testing.T) {
	for _, tt := range []struct{ name, value, want string }{
		{"not a duration", `"soon"`, `reuseCooldown "soon": want a duration such as 30s or 1h (0s turns the cool-down off)`},
		{"no unit", `"30"`, `reuseCooldown "30": want a duration such as 30s`},
		{"negative", `"-1s"`, `reuseCooldown "-1s": want a duration such as 30s`},
		{"below the lower bound", `"999ms"`, `reuseCooldown "999ms": want 0s (off) or a duration from 1s to 168h0m0s`},
		{"above the upper bound", `"169h"`, `reuseCooldown "169h": want 0s (off) or a duration from 1s to 168h0m0s`},
		{"empty", `""`, `reuseCooldown: want a duration such as 30s`},
		{"a number", `30`, `ipam: json: cannot unmarshal number`},
		{"more than 6 digits", `"3600000ms"`, `reuseCooldown "3600000ms": want a duration such as 30s`},
		{"a sign", `"+1s"`, `reuseCooldown "+1s": want a duration such as 30s`},
		{"a micro sign", `"1µs"`, `reuseCooldown "1µs": want a duration such as 30s`},
		{"too long", `"1h1h1h1h1h1h1h1h1h"`, `reuseCooldown "1h1h1h1h1h1h1h1h...": longer than 16 bytes`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load([]byte(`{"name":"n","ipam":{"type":"netpool","range":"10.0.0.0/24","reuseCooldown":`+tt.value+`}}`), "", nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

// FuzzParseReuseCooldown checks that any value parses into the bounds or fails with a typed
// config error; it never panics.
func FuzzParseReuseCooldown(f *testing.F) {
	for _, seed := range []string{"30s", "1h", "0s", "0", "3600000ms", "+1s", "1.", ".5s", "1h1", "1s", "168h", "169h", "999ms", "-1s", "", "1h-1m", "9223372036854775807ns", "1.5h", "µs"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseReuseCooldown("reuseCooldown", s)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if d != 0 && (d < MinReuseCooldown || d > MaxReuseCooldown) {
			t.Fatalf("ParseReuseCooldown(%q) = %v, outside the bounds", s, d)
		}
		if !cooldownGrammar(s) || len(s) > MaxReuseCooldownLen {
			t.Fatalf("ParseReuseCooldown accepted %q, outside the CRD's grammar", s)
		}
	})
}
