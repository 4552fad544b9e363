package harness

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that a test and the goroutines it starts (a server's, an agent's,
// a manager's) can write and read at once, as a log sink.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
