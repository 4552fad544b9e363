package ipamplugin

import (
	"log/slog"
	"testing"
)

// TestLogLevel: log_level's words mean what the daemons' --log-level words mean; unset logs errors
// only, as whereabouts does.
func TestLogLevel(t *testing.T) {
	for word, want := range map[string]slog.Level{
		"": slog.LevelError, "debug": slog.LevelDebug, "verbose": slog.LevelInfo, "info": slog.LevelInfo,
		"warn": slog.LevelWarn, "error": slog.LevelError, "panic": slog.LevelError,
	} {
		if got := logLevel(word); got != want {
			t.Errorf("logLevel(%q) = %v, want %v", word, got, want)
		}
	}
}
