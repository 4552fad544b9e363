package controller

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/go-logr/logr"
)

// Log formats.
const (
	LogFormatJSON = "json"
	LogFormatText = "text"
)

// NewLogger returns a structured logger writing to w in format ("json" or "text") at level
// ("debug", "info", "warn" or "error"). The reconcilers log with key/value pairs through it, and
// controller-runtime and client-go do too once it is installed as their logger.
func NewLogger(w io.Writer, format, level string) (logr.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return logr.Logger{}, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	switch format {
	case LogFormatJSON:
		h = slog.NewJSONHandler(w, opts)
	case LogFormatText:
		h = slog.NewTextHandler(w, opts)
	default:
		return logr.Logger{}, fmt.Errorf("--log-format %q: want %s or %s", format, LogFormatJSON, LogFormatText)
	}
	return logr.FromSlogHandler(h), nil
}
