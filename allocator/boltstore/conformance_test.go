package boltstore

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/storetest"
	"github.com/netpool/netpool/ipam"
)

// TestConformance holds the embedded store to the allocator.Store contract. Every call opens the
// file as one plugin process would; after the suite bbolt's consistency check must pass.
func TestConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netpool.db")
	storetest.Run(t, storetest.Backend{
		Fields: `"datastore":"bbolt","bbolt":{"path":` + strconv.Quote(path) + `}`,
		Open: func(c *ipam.Config) (allocator.Store, error) {
			if c.BboltPath != path {
				t.Errorf("config names %s, not the suite's file %s", c.BboltPath, path)
			}
			return Open(c.BboltPath, c.LockTimeout)
		},
	})
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }() // read-only use; the check's error is the one that matters
	if err := s.Check(); err != nil {
		t.Errorf("bbolt consistency check after the suite: %v", err)
	}
}
