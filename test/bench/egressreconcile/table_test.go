package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestReportJudgesEachTarget(t *testing.T) {
	o := options{routers: 100, changes: 2, maxCreate: 30 * time.Second, maxChange: 2 * time.Second}
	tests := []struct {
		name string
		rep  report
		ok   bool
		want string
	}{
		{"both met", report{create: 20 * time.Second, changes: []time.Duration{time.Second, 1500 * time.Millisecond}}, true, "< 2s ok"},
		{"create missed", report{create: 31 * time.Second, changes: []time.Duration{time.Second, time.Second}}, false, "< 30s MISSED"},
		{"a change missed", report{create: time.Second, changes: []time.Duration{time.Second, 3 * time.Second}}, false, "< 2s MISSED"},
		{"changes not all measured", report{create: time.Second, changes: []time.Duration{time.Second}}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rep.ok(o); got != tt.ok {
				t.Errorf("ok = %t, want %t", got, tt.ok)
			}
			var b bytes.Buffer
			tt.rep.print(&b, o)
			if !strings.Contains(b.String(), tt.want) {
				t.Errorf("table lacks %q:\n%s", tt.want, b.String())
			}
		})
	}
}
