package ipamplugin

import (
	"io"
	"log/slog"
	"os"

	"github.com/netpool/netpool/ipam"
)

// logLevels maps whereabouts' log_level words onto slog levels.
var logLevels = map[string]slog.Level{
	"debug":   slog.LevelDebug,
	"verbose": slog.LevelInfo,
	"info":    slog.LevelInfo,
	"error":   slog.LevelError,
	"panic":   slog.LevelError,
	"":        slog.LevelError,
}

// logger returns the invocation's logger: to log_file when set, else stderr; never stdout, which
// carries the CNI result. A log file that cannot be opened falls back to stderr rather than failing
// the attachment.
func (p *Plugin) logger(c *ipam.Config) (*slog.Logger, func()) {
	var w io.Writer = p.Stderr
	closeFn := func() {}
	if c.LogFile != "" {
		if f, err := os.OpenFile(c.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			w = f
			closeFn = func() { _ = f.Close() } // nothing useful can be done about a failed log close
		}
	}
	h := slog.NewTextHandler(w, &slog.HandlerOptions{Level: logLevels[c.LogLevel]})
	return slog.New(h).With("network", c.Name), closeFn
}
