package ipamplugin

import (
	"io"
	"log/slog"

	"github.com/netpool/netpool/ipam"
)

// logLevel is the level of log_level (ipam.ParseLogLevel, the one spelling the daemons share);
// error when it is unset, as whereabouts logs.
func logLevel(word string) slog.Level {
	if l, err := ipam.ParseLogLevel(word); err == nil {
		return l
	}
	return slog.LevelError
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
	h := slog.NewTextHandler(w, &slog.HandlerOptions{Level: logLevel(c.LogLevel)})
	log := slog.New(h).With("network", c.Name)
	if refused != nil {
		log.Error("Opening log_file failed; logging here instead", "log_file", c.LogFile, "err", refused)
	}
	return log, closeFn
}
