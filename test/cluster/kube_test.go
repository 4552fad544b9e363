package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/scheme"
	"github.com/netpool/netpool/test/cluster"
	"github.com/netpool/netpool/test/poll"
)

// kubeClient is a controller-runtime client of the cluster that knows netpool's kinds.
func kubeClient(t *testing.T, c *cluster.Cluster) client.Client {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// applyNAD creates a NetworkAttachmentDefinition in ns with config.
func applyNAD(t *testing.T, c *cluster.Cluster, ns, name, config string) {
	t.Helper()
	nad := fmt.Sprintf(`{"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
  "metadata": {"name": %q, "namespace": %q}, "spec": {"config": %q}}`, name, ns, config)
	objs, err := cluster.DecodeYAMLBytes([]byte(nad))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(context.Background(), objs); err != nil {
		t.Fatal(err)
	}
}

// networkStatus is one entry of Multus' k8s.v1.cni.cncf.io/network-status annotation.
type networkStatus struct {
	Name      string   `json:"name"`
	Interface string   `json:"interface"`
	IPs       []string `json:"ips"`
	Default   bool     `json:"default"`
}

// secondaryAddr returns the address Multus reports for ifName of pod.
func secondaryAddr(t *testing.T, pod *corev1.Pod, ifName string) string {
	t.Helper()
	raw := pod.Annotations["k8s.v1.cni.cncf.io/network-status"]
	var st []networkStatus
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatalf("pod %s: network-status %q: %v", pod.Name, raw, err)
	}
	for _, s := range st {
		if s.Interface == ifName && len(s.IPs) == 1 {
			return s.IPs[0]
		}
	}
	t.Fatalf("pod %s: network-status %s has no single address on %s", pod.Name, raw, ifName)
	return ""
}

// reservationsOf lists the reservations whose podRef is ns/name.
func reservationsOf(ctx context.Context, cl client.Client, ns, name string) ([]ipamv1.OverlappingRangeIPReservation, error) {
	var list ipamv1.OverlappingRangeIPReservationList
	if err := cl.List(ctx, &list); err != nil {
		return nil, err
	}
	var out []ipamv1.OverlappingRangeIPReservation
	for _, r := range list.Items {
		if r.Spec.PodRef == ns+"/"+name {
			out = append(out, r)
		}
	}
	return out, nil
}

// waitReleased waits until no reservation names ns/name.
func waitReleased(t *testing.T, cl client.Client, ns, name string) {
	t.Helper()
	poll.Eventually(t, 2*time.Minute, "the reservations of "+ns+"/"+name+" released", func() error {
		rs, err := reservationsOf(context.Background(), cl, ns, name)
		if err != nil {
			return err
		}
		if len(rs) > 0 {
			return fmt.Errorf("still reserved: %s", rs[0].Spec.Address)
		}
		return nil
	})
}

// netpoolctl runs this checkout's netpoolctl with args.
func netpoolctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := mustNetpoolctl(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

// agentPod returns the running netpool-agent pod of node.
func agentPod(t *testing.T, c *cluster.Cluster, node string) *corev1.Pod {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods("netpool-system").List(context.Background(), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=netpool-agent", FieldSelector: "spec.nodeName=" + node,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].Status.Phase == corev1.PodRunning && pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no running netpool-agent on %s: %v", node, pods.Items)
	return nil
}

func lines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
