package ipam

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is wrapped by every configuration error, so the CNI boundary can map them all to
// CNI error code 7 (invalid network config) with errors.Is.
var ErrInvalidConfig = errors.New("invalid IPAM config")

// ConfigError names the offending field and value, so an operator can find the mistake in a NAD
// without reading code.
type ConfigError struct {
	Field  string
	Value  string
	Reason string
}

func (e *ConfigError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("invalid IPAM config: %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("invalid IPAM config: %s %q: %s", e.Field, e.Value, e.Reason)
}

// Unwrap lets errors.Is(err, ErrInvalidConfig) hold for every ConfigError.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

func configErr(field, value, format string, args ...any) error {
	return &ConfigError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...)}
}
