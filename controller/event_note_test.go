package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/nad"
	"github.com/netpool/netpool/controller/internal/recorder"
	"github.com/netpool/netpool/test/poll"
)

// A NAD whose error is longer than an Event note may be still gets its Warning, cut to fit, and
// the whole message is in the controller's log. The API server used to reject the Event whole.
func TestALongWarningIsTruncatedNotLost(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	m := mustStartManager(t, nil, testOptions())
	value := "10.40.0.0/" + strings.Repeat("9", 1500)
	bad := f.NAD("long", ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","range":"`+value+`"}`))

	var notes []string
	poll.Eventually(t, 10*time.Second, "the NAD gets its Warning", func() error {
		notes = f.EventsFor(bad.UID, corev1.EventTypeWarning, nad.EventInvalidIPAMConfig)
		if len(notes) == 0 {
			return errors.New("no Warning yet")
		}
		return nil
	})
	note := notes[0]
	if len(note) > recorder.MaxNote || !strings.HasPrefix(note, `spec.config: plugins[0].ipam: invalid IPAM config: ipam.range "10.40.0.0/999`) ||
		!strings.HasSuffix(note, recorder.TruncatedSuffix) {
		t.Errorf("note of %d bytes: %q", len(note), note)
	}
	if logs := m.Logs.String(); !strings.Contains(logs, "Truncating an Event note") || !strings.Contains(logs, value+`\": not a CIDR`) {
		t.Errorf("the log lacks the whole message:\n%s", logs)
	}
}
