package controller

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/go-logr/logr"

	"github.com/netpool/netpool/ipam"
)

// Log formats.
const (
	LogFormatJSON = "json"
	LogFormatText = "text"
)

// NewLogger returns a structured logger writing to w in format ("json" or "text") at level
// (a word of ipam.ParseLogLevel: the one spelling the agent and the plugin's log_level share). The reconcilers log with key/value pairs through it, and
// controller-runtime and client-go do too once it is installed as their logger.
func NewLogger(w io.Writer, format, level string) (logr.Logger, error) {
	lvl, err := ipam.ParseLogLevel(level)
	if err != nil {
		return logr.Logger{}, fmt.Errorf("--log-level %q: want %s", level, ipam.LogLevelWords)
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
