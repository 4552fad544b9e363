package ipam

import (
	"log/slog"
	"testing"
)

// TestParseLogLevel: every word of the one spelling, and an error for anything else.
func TestParseLogLevel(t *testing.T) {
	for word, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "verbose": slog.LevelInfo, "info": slog.LevelInfo,
		"warn": slog.LevelWarn, "error": slog.LevelError, "panic": slog.LevelError,
	} {
		if got, err := ParseLogLevel(word); err != nil || got != want {
			t.Errorf("ParseLogLevel(%q) = %v, %v; want %v", word, got, err, want)
		}
	}
	for _, word := range []string{"", "DEBUG", "warning", "trace"} {
		if _, err := ParseLogLevel(word); err == nil {
			t.Errorf("ParseLogLevel(%q) succeeded", word)
		}
	}
}

// TestLoadLogLevelWords: a NAD's log_level takes every word the daemons' --log-level takes, and
// unset (whereabouts' default, error).
func TestLoadLogLevelWords(t *testing.T) {
	for _, word := range []string{"", "debug", "verbose", "info", "warn", "error", "panic"} {
		c, err := Load(netConf(`{"type":"netpool","range":"10.1.0.0/24","log_level":"`+word+`"}`), "", nil)
		if err != nil || c.LogLevel != word {
			t.Errorf("log_level %q: %v, %+v", word, err, c)
		}
	}
}
