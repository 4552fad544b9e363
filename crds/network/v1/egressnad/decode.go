package egressnad

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Decode reads a config in netpool's form. Top-level fields it does not know are accepted, because
// the runtime adds its own (runtimeConfig, args, prevResult, ...); inside interface, addresses and
// redirect (and its rules) an unknown field is an error, so that a typo cannot silently drop a
// rule. The error names the part at fault; the values are the caller's to validate.
func Decode(data []byte) (*Config, error) {
	c := &Config{}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	// The nested objects once more, strictly: unknown fields are all this pass can add.
	var parts map[string]json.RawMessage
	if err := json.Unmarshal(data, &parts); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		key  string
		into any
	}{{"interface", new(Interface)}, {"addresses", new([]Address)}, {"redirect", new(Redirect)}} {
		if raw, ok := parts[p.key]; ok {
			if err := strictUnmarshal(raw, p.into); err != nil {
				return nil, fmt.Errorf("%s: %w", p.key, err)
			}
		}
	}
	return c, nil
}

// strictUnmarshal decodes data into v, refusing unknown fields at every depth.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the value")
	}
	return nil
}
