package controller

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

func TestTruncateNote(t *testing.T) {
	short := strings.Repeat("a", maxEventNote)
	if got := truncateNote(short); got != short {
		t.Fatal("a note of exactly the limit was changed")
	}
	for _, long := range []string{strings.Repeat("b", 5000), strings.Repeat("é", 700)} {
		got := truncateNote(long)
		if len(got) > maxEventNote || !strings.HasSuffix(got, truncatedSuffix) || !utf8.ValidString(got) {
			t.Errorf("truncated to %d bytes (valid UTF-8: %v): %q", len(got), utf8.ValidString(got), got[len(got)-80:])
		}
		if !strings.HasPrefix(long, strings.TrimSuffix(got, truncatedSuffix)) {
			t.Error("the truncated note is not the start of the message")
		}
	}
}

// A NAD whose error is longer than an Event note may be still gets its Warning, cut to fit, and
// the whole message is in the controller's log. The API server used to reject the Event whole.
func TestALongWarningIsTruncatedNotLost(t *testing.T) {
	f := newFixture(t, nil)
	m := mustStartManager(t, nil, testOptions())
	value := "10.40.0.0/" + strings.Repeat("9", 1500)
	bad := f.nad("long", conflist(`{"type":"netpool","datastore":"kubernetes","range":"`+value+`"}`))

	var notes []string
	eventually(t, 10*time.Second, "the NAD gets its Warning", func() error {
		notes = eventsFor(t, bad.UID, corev1.EventTypeWarning, EventInvalidIPAMConfig)
		if len(notes) == 0 {
			return errors.New("no Warning yet")
		}
		return nil
	})
	note := notes[0]
	if len(note) > maxEventNote || !strings.HasPrefix(note, `spec.config: plugins[0].ipam: invalid IPAM config: ipam.range "10.40.0.0/999`) ||
		!strings.HasSuffix(note, truncatedSuffix) {
		t.Errorf("note of %d bytes: %q", len(note), note)
	}
	if logs := m.logs.String(); !strings.Contains(logs, "Truncating an Event note") || !strings.Contains(logs, value+`\": not a CIDR`) {
		t.Errorf("the log lacks the whole message:\n%s", logs)
	}
}
