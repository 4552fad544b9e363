package kubeclient

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfig(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := Config(missing); err == nil || !strings.Contains(err.Error(), "failed to load kubeconfig "+missing) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing kubeconfig: %v", err)
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		if _, err := Config(""); err == nil || !strings.Contains(err.Error(), "set --kubeconfig outside a cluster") {
			t.Errorf("no kubeconfig outside a cluster: %v", err)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("clusters: [oops"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Config(bad); err == nil || !strings.Contains(err.Error(), "failed to load kubeconfig "+bad) {
		t.Errorf("a kubeconfig that is not YAML: %v", err)
	}
	good := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(good, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://192.0.2.1:6443"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Config(good)
	if err != nil || cfg.Host != "https://192.0.2.1:6443" || cfg.BearerToken != "t" {
		t.Fatalf("Config(%s) = %+v, %v", good, cfg, err)
	}
}
