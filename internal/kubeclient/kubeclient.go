// Package kubeclient loads the API client config of netpool's long-running components, the node
// agent and the controller, so both find their identity and set their rate limits one way; and it
// is the small typed client (Reader, Writer, REST) that netpoolctl and the shared GC policy read
// and write through without linking controller-runtime.
package kubeclient

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultQPS and DefaultBurst raise client-go's client-side rate limit (5/10). For the agent it is
// what one node's attachments can need at once; for the controller, a sweep after an outage may
// release thousands of reservations, each a read and a delete, and the delete client's limit is
// what bounds it. The API server's own priority and fairness still applies.
const (
	DefaultQPS   = 500
	DefaultBurst = 1000
)

// Config loads the API client config from the kubeconfig file at path, or the in-cluster config
// (the pod's ServiceAccount) when path is empty. Callers set the rate limits.
func Config(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("failed to load kubeconfig %s: %w", path, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load the in-cluster config (set --kubeconfig outside a cluster): %w", err)
	}
	return cfg, nil
}
