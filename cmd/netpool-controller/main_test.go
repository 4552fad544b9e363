package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/netpool/netpool/internal/version"
)

func TestParseFlagsDefaults(t *testing.T) {
	c, err := parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.opts.Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	if !c.opts.LeaderElection || c.opts.QPS <= 5 || c.opts.Burst <= 10 || c.logFormat != "json" || c.kubeconfig != "" {
		t.Fatalf("unexpected defaults: %+v", c)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"unknown flag":     {"--no-such-flag"},
		"bad duration":     {"--gc-grace=soon"},
		"stray argument":   {"extra"},
		"bad number":       {"--kube-api-qps=many"},
		"help is an error": {"-h"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseFlags(args, &bytes.Buffer{}); err == nil {
				t.Fatalf("parseFlags(%q) succeeded", args)
			}
		})
	}
}

func TestRunRejectsBadLoggingAndOptions(t *testing.T) {
	for name, args := range map[string][]string{
		"log format":   {"--log-format=xml"},
		"log level":    {"--log-level=loud"},
		"kubeconfig":   {"--kubeconfig=" + filepath.Join(t.TempDir(), "missing")},
		"grace":        {"--kubeconfig=" + writeKubeconfig(t), "--gc-grace=0s"},
		"renew window": {"--kubeconfig=" + writeKubeconfig(t), "--leader-election-renew-deadline=20s"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(args, &bytes.Buffer{}); err == nil {
				t.Fatalf("run(%q) succeeded", args)
			}
		})
	}
}

// TestVersion: --version prints the stamped version and starts nothing (no kubeconfig is read).
func TestVersion(t *testing.T) {
	old := version.Version
	t.Cleanup(func() { version.Version = old })
	version.Version = "v0.9.0-3-gabcdef0"
	var out bytes.Buffer
	if err := run([]string{"--version", "--kubeconfig=" + filepath.Join(t.TempDir(), "missing")}, &out); err != nil {
		t.Fatalf("run(--version) = %v", err)
	}
	if out.String() != "netpool-controller v0.9.0-3-gabcdef0\n" {
		t.Errorf("--version printed %q", out.String())
	}
}

// TestDeploymentArgsParse parses the container args of deploy/base/controller.yaml, so the manifest
// never names a flag the binary does not have.
func TestDeploymentArgsParse(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "base", "controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("no Deployment in deploy/base/controller.yaml: %v", err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "$(POD_NAMESPACE)", "netpool-system")
		}
		c, err := parseFlags(args, &bytes.Buffer{})
		if err != nil {
			t.Fatalf("the Deployment's args %q do not parse: %v", args, err)
		}
		if err := c.opts.Validate(); err != nil {
			t.Fatal(err)
		}
		if c.opts.GCGrace != 2*time.Minute || c.opts.LeaderElectionNamespace != "netpool-system" {
			t.Fatalf("unexpected options from the Deployment: %+v", c.opts)
		}
		return
	}
}

// writeKubeconfig writes a kubeconfig pointing at nothing, so run gets past loading it.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const kc = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
