package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/controller"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/test/bench/benchenv"
)

// namespace holds the bench's routers.
const namespace = "egress-bench"

// run starts the control plane and the controller, measures, and tears everything down.
func run(ctx context.Context, o options) (*report, error) {
	root, err := benchenv.Root()
	if err != nil {
		return nil, err
	}
	plane, err := benchenv.Start(root, benchenv.Options{NAD: true, QPS: 2000, Burst: 4000})
	if err != nil {
		return nil, err
	}
	defer func() { _ = plane.Stop() }() // the bench's figures are printed either way
	cfg, c := plane.Config, plane.Client
	opts := controller.DefaultOptions()
	opts.LeaderElection = false
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	if path := os.Getenv("EGRESS_BENCH_LOG"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }()
		if opts.Logger, err = controller.NewLogger(f, controller.LogFormatText, "info"); err != nil {
			return nil, err
		}
	}
	mgr, err := controller.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { cancel(); <-done }()

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return nil, err
	}
	kctx, stopKubelet := context.WithCancel(ctx)
	defer stopKubelet()
	if err := startKubelet(kctx, c, o.concurrency); err != nil {
		return nil, err
	}
	rep := &report{}
	if rep.create, err = measureCreate(ctx, c, o); err != nil {
		return rep, err
	}
	for i := range o.changes {
		d, err := measureChange(ctx, c, fmt.Sprintf("router-%d", i), int32(9000+i))
		if err != nil {
			return rep, err
		}
		rep.changes = append(rep.changes, d)
	}
	slices.Sort(rep.changes)
	return rep, nil
}

// router is router i of the bench: one IPv4 address, two rules.
func router(i int) *networkv1.EgressRouter {
	return &networkv1.EgressRouter{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("router-%d", i)},
		Spec: networkv1.EgressRouterSpec{
			Mode:             networkv1.EgressRouterModeRedirect,
			NetworkInterface: networkv1.EgressRouterInterface{Macvlan: networkv1.MacvlanConfig{Mode: networkv1.MacvlanModeBridge}},
			Addresses:        []networkv1.EgressRouterAddress{{IP: fmt.Sprintf("192.168.%d.%d/16", 10+i/250, 2+i%250), Gateway: "192.168.0.1"}},
			Redirect: &networkv1.RedirectConfig{RedirectRules: []networkv1.L4RedirectRule{
				{DestinationIP: "203.0.113.26", Port: 8080, TargetPort: 80, Protocol: networkv1.ProtocolTypeTCP},
				{DestinationIP: "10.0.0.99", Port: 53, Protocol: networkv1.ProtocolTypeUDP},
			}},
		},
	}
}

// startKubelet plays the kubelet and Multus for every router pod that appears: it writes the
// network-status showing the pod's NAD addresses on net1 and marks the pod Ready.
func startKubelet(ctx context.Context, c client.WithWatch, workers int) error {
	w, err := c.Watch(ctx, &corev1.PodList{}, client.InNamespace(namespace))
	if err != nil {
		return fmt.Errorf("failed to watch pods: %w", err)
	}
	queue := make(chan *corev1.Pod, 1024)
	go func() {
		defer close(queue)
		defer w.Stop()
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
				queue <- pod
			}
		}
	}()
	for range workers {
		go func() {
			for pod := range queue {
				for ctx.Err() == nil {
					if err := markReady(ctx, c, pod); err == nil {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	return nil
}

// markReady writes what Multus and the kubelet would for pod: its egress addresses are those of the
// NAD the pod attaches.
func markReady(ctx context.Context, c client.Client, pod *corev1.Pod) error {
	nad := &nadv1.NetworkAttachmentDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Name}, nad); err != nil {
		return err
	}
	var cfg struct {
		Addresses []struct {
			IP string `json:"ip"`
		} `json:"addresses"`
	}
	if err := json.Unmarshal([]byte(nad.Spec.Config), &cfg); err != nil {
		return err
	}
	var ips []string
	for _, a := range cfg.Addresses {
		ip, _, _ := strings.Cut(a.IP, "/")
		ips = append(ips, ip)
	}
	status, err := json.Marshal([]nadv1.NetworkStatus{
		{Name: "cluster", Interface: "eth0", IPs: []string{"10.244.0.5"}, Default: true},
		{Name: pod.Namespace + "/" + pod.Name, Interface: "net1", IPs: ips},
	})
	if err != nil {
		return err
	}
	base := pod.DeepCopy()
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[nadv1.NetworkStatusAnnot] = string(status)
	if err := c.Patch(ctx, pod, client.MergeFrom(base)); err != nil {
		return err
	}
	base = pod.DeepCopy()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	return c.Status().Patch(ctx, pod, client.MergeFrom(base))
}

// measureCreate creates every router at once and returns the time until all are Available.
func measureCreate(ctx context.Context, c client.Client, o options) (time.Duration, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, o.routers)
	sem := make(chan struct{}, o.concurrency)
	for i := range o.routers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = c.Create(ctx, router(i))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("failed to create the routers: %w", err)
	}
	deadline := start.Add(2*o.maxCreate + 30*time.Second)
	for {
		var list networkv1.EgressRouterList
		if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return 0, err
		}
		available := 0
		for i := range list.Items {
			r := &list.Items[i]
			if c := meta.FindStatusCondition(r.Status.Conditions, networkv1.EgressRouterAvailable); c != nil &&
				c.Status == metav1.ConditionTrue && c.ObservedGeneration == r.Generation {
				available++
			}
		}
		if available == o.routers {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("only %d of %d routers Available after %s", available, o.routers, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// measureChange moves the TCP rule of router name to port and returns the time until the NAD's
// config, the Service's ports and a pod of the new config all show it.
func measureChange(ctx context.Context, c client.Client, name string, port int32) (time.Duration, error) {
	key := client.ObjectKey{Namespace: namespace, Name: name}
	r := &networkv1.EgressRouter{}
	if err := c.Get(ctx, key, r); err != nil {
		return 0, err
	}
	oldPod := &corev1.Pod{}
	if err := c.Get(ctx, key, oldPod); err != nil {
		return 0, err
	}
	r.Spec.Redirect.RedirectRules[0].Port = port
	start := time.Now()
	if err := c.Update(ctx, r); err != nil {
		return 0, err
	}
	want := fmt.Sprintf(`"port":%d,`, port)
	var nadAt, svcAt, podAt time.Duration
	for nadAt == 0 || svcAt == 0 || podAt == 0 {
		if time.Since(start) > 30*time.Second {
			return 0, fmt.Errorf("router %s: the change did not reach every child in 30s (NAD %s, Service %s, pod %s)", name, nadAt, svcAt, podAt)
		}
		if nadAt == 0 {
			nad := &nadv1.NetworkAttachmentDefinition{}
			if err := c.Get(ctx, key, nad); err == nil && strings.Contains(nad.Spec.Config, want) {
				nadAt = time.Since(start)
			}
		}
		if svcAt == 0 {
			svc := &corev1.Service{}
			if err := c.Get(ctx, key, svc); err == nil && slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port }) {
				svcAt = time.Since(start)
			}
		}
		if podAt == 0 {
			pod := &corev1.Pod{}
			if err := c.Get(ctx, key, pod); err == nil && pod.UID != oldPod.UID &&
				pod.Annotations[networkv1.ConfigHashAnnotation] != oldPod.Annotations[networkv1.ConfigHashAnnotation] {
				podAt = time.Since(start)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return max(nadAt, svcAt, podAt), nil
}
