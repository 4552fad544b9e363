package ipamplugin

import (
	"io"
	"log/slog"

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
	var refused error
	if c.LogFile != "" {
		open := p.OpenLog
		if open == nil {
			open = OpenLogFile
		}
		if f, err := open(c.LogFile); err == nil {
			w = f
			closeFn = func() { _ = f.Close() } // nothing useful can be done about a failed log close
		} else {
			refused = err
		}
	}
	h := slog.NewTextHandler(w, &slog.HandlerOptions{Level: logLevels[c.LogLevel]})
	log := slog.New(h).With("network", c.Name)
	if refused != nil {
		log.Error("Opening log_file failed; logging here instead", "log_file", c.LogFile, "err", refused)
	}
	return log, closeFn
}
