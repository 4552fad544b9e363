package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/netpool/netpool/test/harness/kustomize"
)

// InstallNetpool installs netpool as the README's Kubernetes quick start has an operator do: a
// copy of deploy/ with the local overlay of step 2 (the image's tag), rendered by kustomize and
// applied; then it waits until the agent DaemonSet runs on every node and the controller
// Deployment is Available with every replica.
func (c *Cluster) InstallNetpool(ctx context.Context) error {
	dir := filepath.Join(c.dir, "deploy")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(c.opts.Root, "deploy"))); err != nil {
		return fmt.Errorf("copying deploy/: %w", err)
	}
	local := filepath.Join(dir, "overlays", "local")
	_ = os.RemoveAll(local) // an overlay the developer wrote in the checkout is not the harness's
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(local, "kustomization.yaml"), []byte(kustomize.LocalOverlay(c.ImageTag)), 0o644); err != nil {
		return err
	}
	objs, err := kustomize.Build(local)
	if err != nil {
		return fmt.Errorf("kustomize build deploy/overlays/local: %w", err)
	}
	if c.opts.GCGrace > 0 {
		if err := setGCGrace(objs, c.opts.GCGrace); err != nil {
			return err
		}
	}
	if err := c.Apply(ctx, objs); err != nil {
		return err
	}
	c.say("deploy/overlays/local applied (%d objects)", len(objs))
	return c.WaitNetpool(ctx)
}

// WaitNetpool waits until the agent runs, ready, on every node and the controller Deployment is
// Available with all its replicas ready.
func (c *Cluster) WaitNetpool(ctx context.Context) error {
	err := c.wait(ctx, 3*time.Minute, "the netpool-agent DaemonSet ready on every node", func(ctx context.Context) error {
		ds, err := c.Client.AppsV1().DaemonSets("netpool-system").Get(ctx, "netpool-agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s := ds.Status
		if s.ObservedGeneration < ds.Generation || s.DesiredNumberScheduled != int32(len(c.Nodes)) || s.NumberReady != s.DesiredNumberScheduled || s.UpdatedNumberScheduled != s.DesiredNumberScheduled {
			return fmt.Errorf("desired %d, ready %d, updated %d", s.DesiredNumberScheduled, s.NumberReady, s.UpdatedNumberScheduled)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.wait(ctx, 3*time.Minute, "the netpool-controller Deployment Available", func(ctx context.Context) error {
		d, err := c.Client.AppsV1().Deployments("netpool-system").Get(ctx, "netpool-controller", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !deploymentAvailable(d) {
			return fmt.Errorf("replicas %d, ready %d, available %d, conditions %v", d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.Conditions)
		}
		return nil
	})
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.ObservedGeneration < d.Generation || d.Status.ReadyReplicas != want || d.Status.AvailableReplicas != want || d.Status.UpdatedReplicas != want {
		return false
	}
	for _, cd := range d.Status.Conditions {
		if cd.Type == appsv1.DeploymentAvailable {
			return cd.Status == "True"
		}
	}
	return false
}

// setGCGrace replaces the --gc-grace argument of the controller Deployment among objs with grace,
// failing when there is none to replace (deploy/ changed under the harness).
func setGCGrace(objs []*unstructured.Unstructured, grace time.Duration) error {
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != "netpool-controller" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for i, ct := range containers {
			m, _ := ct.(map[string]any)
			args, _ := m["args"].([]any)
			for j, a := range args {
				if s, _ := a.(string); strings.HasPrefix(s, "--gc-grace=") {
					args[j] = "--gc-grace=" + grace.String()
					m["args"] = args
					containers[i] = m
					return unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
				}
			}
		}
		return fmt.Errorf("the netpool-controller Deployment has no --gc-grace argument to replace")
	}
	return fmt.Errorf("no netpool-controller Deployment in deploy/overlays/local")
}
