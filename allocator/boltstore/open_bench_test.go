package boltstore

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkOpenClose is what every plugin call pays to open the store: the sidecar lock, the
// checks of the file before it is mapped, bbolt's open and the close.
func BenchmarkOpenClose(b *testing.B) {
	path := filepath.Join(b.TempDir(), "netpool.db")
	s, err := Open(path, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s, err := Open(path, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
