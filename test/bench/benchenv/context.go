package benchenv

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Context returns the context of a bench's run, ended by SIGINT or SIGTERM so that the bench still
// stops what it started, and discards controller-runtime's log: envtest's own messages add nothing
// to the tables.
func Context() (context.Context, context.CancelFunc) {
	ctrllog.SetLogger(logr.Discard())
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
