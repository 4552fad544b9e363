package controller

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig loads the API client config from the kubeconfig file at path, or the in-cluster
// config (the Deployment's ServiceAccount) when path is empty. New applies the rate limits.
func RESTConfig(path string) (*rest.Config, error) {
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
