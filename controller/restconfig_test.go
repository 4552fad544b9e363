package controller

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRESTConfig(t *testing.T) {
	if _, err := RESTConfig(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "failed to load kubeconfig") {
		t.Fatalf("a missing kubeconfig: %v", err)
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		if _, err := RESTConfig(""); err == nil || !strings.Contains(err.Error(), "set --kubeconfig outside a cluster") {
			t.Fatalf("no kubeconfig outside a cluster: %v", err)
		}
	}
	if env == nil {
		t.Skip("envtest did not start")
	}
	cfg, err := RESTConfig(env.Kubeconfig)
	if err != nil || cfg.Host == "" {
		t.Fatalf("RESTConfig(%s) = %v, %v", env.Kubeconfig, cfg, err)
	}
}
