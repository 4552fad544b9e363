package cli

import (
	"fmt"

	"github.com/netpool/netpool/allocator/boltstore"
	"github.com/netpool/netpool/cli/inventory"
	"github.com/netpool/netpool/internal/gcpolicy"
)

// source opens where the allocations live: the bbolt file of --db (never created: a missing or
// corrupt file is an error and stays as it is; --request-timeout bounds the wait for its lock,
// as it bounds a request to a cluster) or the cluster. A release in the cluster judges owners
// with the controller's default GC grace period.
func (o *options) source() (inventory.Source, error) {
	embedded, err := o.embedded()
	if err != nil {
		return nil, err
	}
	if embedded {
		s, err := boltstore.OpenExisting(o.db, o.timeout)
		if err != nil {
			return nil, fmt.Errorf("--db: %w", err)
		}
		return &inventory.Bolt{Store: s}, nil
	}
	c, err := o.kubeClient()
	if err != nil {
		return nil, err
	}
	return &inventory.Cluster{Client: c, Now: o.now, Grace: gcpolicy.DefaultGrace}, nil
}
