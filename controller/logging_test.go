package controller

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	log, err := NewLogger(&b, LogFormatJSON, "info")
	if err != nil {
		t.Fatal(err)
	}
	log.V(1).Info("Hidden at info")
	log.Info("Releasing a leaked reservation", "reservation", "p.10.0.0.5")
	var line map[string]any
	if err := json.Unmarshal(b.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q (%v)", b.String(), err)
	}
	if line["msg"] != "Releasing a leaked reservation" || line["reservation"] != "p.10.0.0.5" {
		t.Fatalf("line %v", line)
	}
	b.Reset()
	text, err := NewLogger(&b, LogFormatText, "debug")
	if err != nil {
		t.Fatal(err)
	}
	text.V(1).Info("Shown at debug", "k", "v")
	if !strings.Contains(b.String(), `msg="Shown at debug" k=v`) {
		t.Fatalf("text line %q", b.String())
	}
	for _, bad := range [][2]string{{"xml", "info"}, {LogFormatJSON, "loud"}} {
		if _, err := NewLogger(&b, bad[0], bad[1]); err == nil {
			t.Errorf("NewLogger(%q, %q) succeeded", bad[0], bad[1])
		}
	}
}
