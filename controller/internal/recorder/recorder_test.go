package recorder

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateNote(t *testing.T) {
	short := strings.Repeat("a", MaxNote)
	if got := truncateNote(short); got != short {
		t.Fatal("a note of exactly the limit was changed")
	}
	for _, long := range []string{strings.Repeat("b", 5000), strings.Repeat("é", 700)} {
		got := truncateNote(long)
		if len(got) > MaxNote || !strings.HasSuffix(got, TruncatedSuffix) || !utf8.ValidString(got) {
			t.Errorf("truncated to %d bytes (valid UTF-8: %v): %q", len(got), utf8.ValidString(got), got[len(got)-80:])
		}
		if !strings.HasPrefix(long, strings.TrimSuffix(got, TruncatedSuffix)) {
			t.Error("the truncated note is not the start of the message")
		}
	}
}
