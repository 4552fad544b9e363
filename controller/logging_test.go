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
	for _, bad := range [][3]string{
		{"xml", "info", "--log-format"},
		{LogFormatJSON, "loud", `--log-level "loud": want debug, verbose, info, warn, error or panic`},
		{LogFormatJSON, "", `--log-level "": want debug, verbose, info, warn, error or panic`},
	} {
		if _, err := NewLogger(&b, bad[0], bad[1]); err == nil || !strings.Contains(err.Error(), bad[2]) {
			t.Errorf("NewLogger(%q, %q) = %v, want an error with %q", bad[0], bad[1], err, bad[2])
		}
	}
	// The plugin's log_level words: verbose is info (debug hidden), panic is error.
	b.Reset()
	verbose, err := NewLogger(&b, LogFormatText, "verbose")
	if err != nil {
		t.Fatal(err)
	}
	verbose.V(1).Info("Hidden at verbose")
	verbose.Info("Shown at verbose")
	if strings.Contains(b.String(), "Hidden") || !strings.Contains(b.String(), "Shown at verbose") {
		t.Errorf("verbose logged %q", b.String())
	}
	b.Reset()
	panicLevel, err := NewLogger(&b, LogFormatText, "panic")
	if err != nil {
		t.Fatal(err)
	}
	panicLevel.Info("Hidden at panic")
	panicLevel.Error(nil, "Shown at panic")
	if strings.Contains(b.String(), "Hidden") || !strings.Contains(b.String(), "Shown at panic") {
		t.Errorf("panic logged %q", b.String())
	}
}
