package controller

import (
	"fmt"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// maxEventNote is the longest note the API server accepts on an events.k8s.io/v1 Event (1 kB).
// A longer one is rejected whole, and the owner of the object never learns what is wrong.
const maxEventNote = 1024

// truncatedSuffix ends a note that was cut to fit.
const truncatedSuffix = " … (truncated; the netpool controller's log has the whole message)"

// truncatingRecorder records Events whose notes fit what the API server accepts: a longer note is
// cut, and the whole message is logged first, so that it is not lost.
type truncatingRecorder struct {
	events.EventRecorder
	log logr.Logger
}

// Eventf formats the note and records it, cut to maxEventNote bytes when it is longer.
func (r truncatingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	msg := fmt.Sprintf(note, args...)
	if len(msg) > maxEventNote {
		r.log.Info("Truncating an Event note the API server would reject", "reason", reason, "type", eventtype,
			"length", len(msg), "message", msg)
		msg = truncateNote(msg)
	}
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", msg)
}

// truncateNote cuts msg to maxEventNote bytes with truncatedSuffix, at a character boundary.
func truncateNote(msg string) string {
	if len(msg) <= maxEventNote {
		return msg
	}
	cut := maxEventNote - len(truncatedSuffix)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + truncatedSuffix
}
