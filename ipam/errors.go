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
	// Cause is the error the reason was made from (a JSON syntax error, a failed read), or nil.
	Cause error
}

func (e *ConfigError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("invalid IPAM config: %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("invalid IPAM config: %s %q: %s", e.Field, e.Value, e.Reason)
}

// Unwrap lets errors.Is(err, ErrInvalidConfig) hold for every ConfigError, and errors.Is and
// errors.As reach its cause.
func (e *ConfigError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrInvalidConfig}
	}
	return []error{ErrInvalidConfig, e.Cause}
}

// configErr returns the ConfigError of field and value, with the reason format. An error among
// args is the reason's source: it becomes the Cause, so formatting it does not cut the chain.
func configErr(field, value, format string, args ...any) error {
	e := &ConfigError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			e.Cause = err
			break
		}
	}
	return e
}
