package e2e

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadutils "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/utils"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/netpool/netpool/controller"
	"github.com/netpool/netpool/internal/scheme"
	"github.com/netpool/netpool/test/envtest"
)

// mustController runs the netpool controller (every reconciler, the EgressRouter's among them) in
// this process against env, as the netpool-controller binary would with one replica, and returns
// a client with the controller's scheme. The test's end stops it and checks that it stopped cleanly.
func mustController(t *testing.T, env *envtest.Env) client.Client {
	t.Helper()
	return mustControllerWith(t, env, nil)
}

// mustControllerWith is mustController with options changed by set (nil: the defaults).
func mustControllerWith(t *testing.T, env *envtest.Env, set func(*controller.Options)) client.Client {
	t.Helper()
	s, err := scheme.New()
	must(t, err)
	c, err := client.New(env.Config, client.Options{Scheme: s})
	must(t, err)
	opts := controller.DefaultOptions()
	opts.LeaderElection = false
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	// Several tests of this binary run a controller: each gets a metrics registry of its own.
	opts.Registerer = prometheus.NewRegistry()
	opts.Logger, err = controller.NewLogger(os.Stderr, controller.LogFormatText, "error")
	must(t, err)
	ctrllog.SetLogger(opts.Logger) // as the controller binary does; the agent tests set it too
	if set != nil {
		set(&opts)
	}
	mgr, err := controller.New(env.Config, opts)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	return c
}

// reportPodStarted writes what Multus and the kubelet write once pod's sandbox is up: the
// network-status annotation, whose default-network entry holds clusterIP on eth0 and whose entry
// for network is built from the CNI result res as Multus builds it, then the status, Running and
// Ready with clusterIP as the pod IP.
func reportPodStarted(ctx context.Context, t *testing.T, c client.Client, pod *corev1.Pod, network string, res *current.Result, clusterIP string) {
	t.Helper()
	attached, err := nadutils.CreateNetworkStatus(res, network, false, nil)
	must(t, err)
	status, err := json.Marshal([]nadv1.NetworkStatus{
		{Name: "cluster", Interface: "eth0", IPs: []string{clusterIP}, Default: true},
		*attached,
	})
	must(t, err)
	base := pod.DeepCopy()
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[nadv1.NetworkStatusAnnot] = string(status)
	must(t, c.Patch(ctx, pod, client.MergeFrom(base)))

	base = pod.DeepCopy()
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = clusterIP
	pod.Status.PodIPs = []corev1.PodIP{{IP: clusterIP}}
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	must(t, c.Status().Patch(ctx, pod, client.MergeFrom(base)))
}
