package kubestore

import (
	"testing"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/storetest"
	"github.com/netpool/netpool/ipam"
	"github.com/netpool/netpool/test/envtest"
)

// TestConformance holds the Kubernetes store to the allocator.Store contract on a real API server:
// one node's Store, bound to each call's config as the agent binds it.
func TestConformance(t *testing.T) {
	env := envtest.Start(t)
	s := MustStart(t, env, "conformance-node", Options{}, nil)
	storetest.Run(t, storetest.Backend{
		Fields: `"datastore":"kubernetes"`,
		Open: func(c *ipam.Config) (allocator.Store, error) {
			// The suite's configs are inline ranges, which Bind resolves to themselves.
			st, _, err := s.Bind(c)
			return st, err
		},
	})
}
