package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

const (
	namespace = "bench"
	poolName  = "bench"
)

// workload is what load made: attachment i is pod i with the i-th address of the pool.
type workload struct {
	pods         []*corev1.Pod
	reservations []string
	// leaked are the attachments the sweep must release: [0, deleted+finished).
	leaked int
	// deletedLive are the attachments after them whose pods the latency measurement deleted:
	// [leaked, leaked+deletedLive), released then.
	deletedLive int
	// addrs are the attachments' addresses, for recreating a leak.
	addrs []netip.Addr
	// loaded is when the last reservation was created.
	loaded time.Time
}

// load creates the pool, the nodes, the pods and their reservations, then makes the leaks (pods
// deleted and finished) and waits out the grace period, so that every leak is releasable at once.
func load(ctx context.Context, c *cluster, o options, rep *report) (*workload, error) {
	began := time.Now()
	cl := c.client
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return nil, err
	}
	if err := cl.Create(ctx, &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: poolName}, Spec: ipamv1.IPPoolSpec{Range: o.cidr}}); err != nil {
		return nil, err
	}
	if err := parallel(ctx, o.nodes, o.concurrency, func(i int) error {
		return cl.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i)}})
	}); err != nil {
		return nil, fmt.Errorf("failed to create the nodes: %w", err)
	}
	w := &workload{pods: make([]*corev1.Pod, o.pods), reservations: make([]string, o.pods), leaked: o.deleted + o.finished}
	base := netip.MustParsePrefix(o.cidr).Addr()
	addrs := make([]netip.Addr, o.pods)
	for a, i := base.Next(), 0; i < o.pods; a, i = a.Next(), i+1 {
		addrs[i] = a
	}
	w.addrs = addrs
	err := parallel(ctx, o.pods, o.concurrency, func(i int) error {
		pod, err := createPod(ctx, cl, i, addrs[i], o.nodes)
		if err != nil {
			return err
		}
		w.pods[i] = pod
		r := reservation(pod, addrs[i], nodeName(i%o.nodes))
		w.reservations[i] = r.Name
		return cl.Create(ctx, r)
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create the pods and reservations: %w", err)
	}
	w.loaded = time.Now()
	err = parallel(ctx, w.leaked, o.concurrency, func(i int) error {
		if i < o.deleted {
			return cl.Delete(ctx, w.pods[i], client.GracePeriodSeconds(0))
		}
		p := w.pods[i].DeepCopy()
		p.Status.Phase = corev1.PodSucceeded
		return cl.Status().Update(ctx, p)
	})
	if err != nil {
		return nil, fmt.Errorf("failed to make the leaks: %w", err)
	}
	rep.loadTime = time.Since(began)
	if wait := time.Until(w.loaded.Add(o.grace + time.Second)); wait > 0 {
		time.Sleep(wait) // creationTimestamp has whole seconds: one more makes every leak old enough
	}
	return w, nil
}

// createPod creates pod i, Running, with addr in its network-status, as kubelet and Multus leave it.
func createPod(ctx context.Context, cl client.Client, i int, addr netip.Addr, nodes int) (*corev1.Pod, error) {
	status, err := json.Marshal([]nadv1.NetworkStatus{
		{Name: "cbr0", Interface: "eth0", IPs: []string{fmt.Sprintf("10.%d.%d.%d", 244+i/62500, i/250%250, i%250+1)}, Default: true},
		{Name: namespace + "/net1", Interface: "net1", IPs: []string{addr.String()}},
	})
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("p-%06d", i),
			Annotations: map[string]string{nadv1.NetworkStatusAnnot: string(status)}},
		Spec: corev1.PodSpec{NodeName: nodeName(i % nodes), Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if err := cl.Create(ctx, pod); err != nil {
		return nil, err
	}
	pod.Status.Phase = corev1.PodRunning
	if err := cl.Status().Update(ctx, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// reservation is the agent's reservation of addr for pod on node.
func reservation(pod *corev1.Pod, addr netip.Addr, node string) *ipamv1.OverlappingRangeIPReservation {
	return &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{
			Name:   ipamv1.ReservationName(poolName, addr),
			Labels: map[string]string{ipamv1.NodeLabel: node, ipamv1.PoolLabel: poolName},
		},
		Spec: ipamv1.OverlappingRangeIPReservationSpec{
			Address: addr.String(), Pool: poolName, ContainerID: "c" + string(pod.UID)[:8] + pod.Name[2:],
			IfName: "net1", PodRef: namespace + "/" + pod.Name, PodUID: string(pod.UID), Node: node,
		},
	}
}

func nodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, f func(int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
