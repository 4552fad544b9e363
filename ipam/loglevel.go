package ipam

import (
	"fmt"
	"log/slog"
)

// logLevelWords are the one spelling of log levels that the plugin's log_level and the daemons'
// --log-level share: whereabouts' words (debug, verbose, info, error, panic), so a whereabouts
// NAD keeps its log_level, and slog's warn. verbose logs as info and panic as error: netpool has
// no level between debug and info, and never panics on purpose.
var logLevelWords = map[string]slog.Level{
	"debug":   slog.LevelDebug,
	"verbose": slog.LevelInfo,
	"info":    slog.LevelInfo,
	"warn":    slog.LevelWarn,
	"error":   slog.LevelError,
	"panic":   slog.LevelError,
}

// LogLevelWords lists the words ParseLogLevel takes, for messages.
const LogLevelWords = "debug, verbose, info, warn, error or panic"

// ParseLogLevel returns the level a log-level word names.
func ParseLogLevel(word string) (slog.Level, error) {
	if l, ok := logLevelWords[word]; ok {
		return l, nil
	}
	return 0, fmt.Errorf("log level %q: want %s", word, LogLevelWords)
}
