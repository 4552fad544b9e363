package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/netpool/netpool/test/poll"
)

// startupPods is how many pods each half of TestPodStartup creates, the Kubernetes pod-startup
// SLO's sample.
const startupPods = 20

// TestPodStartup measures pods from Create to Running on the real nodes: 20 with a netpool
// secondary network (Multus, macvlan, the agent's reservation) and, in the same run, 20 without as
// the baseline. It prints both p50s and p90s (the README's figures); it fails only when a pod
// does not start, since its timing depends on the machine's load.
func TestPodStartup(t *testing.T) {
	c := need(t)
	ns := testNamespace(t, c, nil)
	applyNAD(t, c, ns, "storage", storageNAD("storage-startup", "192.168.28.0/24", "192.168.28.1"))
	base := startupRun(t, ns, "plain", nil)
	withNet := startupRun(t, ns, "netpool", map[string]string{"k8s.v1.cni.cncf.io/networks": "storage"})
	t.Logf("pod created to Running over %d pods: without a secondary network p50 %s p90 %s; with netpool on net1 p50 %s p90 %s",
		startupPods, pct(base, 50), pct(base, 90), pct(withNet, 50), pct(withNet, 90))
	fmt.Printf("STARTUP plain_p50=%s plain_p90=%s netpool_p50=%s netpool_p90=%s\n", pct(base, 50), pct(base, 90), pct(withNet, 50), pct(withNet, 90))
}

// startupRun creates startupPods pods, alternating nodes, one right after another, and returns
// each one's time from its Create call to the watch event that shows it Running.
func startupRun(t *testing.T, ns, prefix string, annotations map[string]string) []time.Duration {
	t.Helper()
	c := shared
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "startup=" + prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	took := map[string]time.Duration{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || p.Status.Phase != corev1.PodRunning {
				continue
			}
			now := time.Now()
			mu.Lock()
			if _, seen := took[p.Name]; !seen {
				if at, ok := created[p.Name]; ok {
					took[p.Name] = now.Sub(at)
				}
			}
			n := len(took)
			mu.Unlock()
			if n == startupPods {
				return
			}
		}
	}()
	for i := 0; i < startupPods; i++ {
		node := c.Nodes[i%len(c.Nodes)].Name
		p := serverPod(ns, fmt.Sprintf("%s-%d", prefix, i), node, annotations)
		p.Labels["startup"] = prefix
		mu.Lock()
		created[p.Name] = time.Now()
		mu.Unlock()
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	mu.Lock()
	n := len(took)
	mu.Unlock()
	if n != startupPods {
		t.Fatalf("%s: %d of %d pods Running within 5 minutes", prefix, n, startupPods)
	}
	var out []time.Duration
	mu.Lock()
	for _, d := range took {
		out = append(out, d)
	}
	mu.Unlock()
	slices.Sort(out)
	// The pods go, so that the next run and the next test start from an idle node.
	for i := 0; i < startupPods; i++ {
		if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), fmt.Sprintf("%s-%d", prefix, i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Eventually(t, 3*time.Minute, "the "+prefix+" pods gone", func() error {
		l, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "startup=" + prefix})
		if err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("%d left", len(l.Items))
		}
		return nil
	})
	return out
}

// pct is the p-th percentile of sorted ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := (len(ds)*p + 99) / 100
	if i > 0 {
		i--
	}
	return ds[i].Round(10 * time.Millisecond)
}
