// Package recorder records the controller's Events so that the API server accepts every one: a
// note longer than an Event may carry is cut, and the whole message logged.
package recorder

import (
	"fmt"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// MaxNote is the longest note the API server accepts on an events.k8s.io/v1 Event (1 kB).
// A longer one is rejected whole, and the owner of the object never learns what is wrong.
const MaxNote = 1024

// TruncatedSuffix ends a note that was cut to fit.
const TruncatedSuffix = " … (truncated; the netpool controller's log has the whole message)"

// Truncating records Events whose notes fit what the API server accepts: a longer note is cut,
// and the whole message is logged first (to Log), so that it is not lost.
type Truncating struct {
	events.EventRecorder
	Log logr.Logger
}

// Eventf formats the note and records it, cut to MaxNote bytes when it is longer.
func (r Truncating) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	msg := fmt.Sprintf(note, args...)
	if len(msg) > MaxNote {
		r.Log.Info("Truncating an Event note the API server would reject", "reason", reason, "type", eventtype,
			"length", len(msg), "message", msg)
		msg = truncateNote(msg)
	}
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", msg)
}

// truncateNote cuts msg to MaxNote bytes with TruncatedSuffix, at a character boundary.
func truncateNote(msg string) string {
	if len(msg) <= MaxNote {
		return msg
	}
	cut := MaxNote - len(TruncatedSuffix)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + TruncatedSuffix
}
