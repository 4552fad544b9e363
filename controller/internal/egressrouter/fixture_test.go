package controller

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	networkv1 "github.com/netpool/netpool/crds/network/v1"
)

// Helpers of the EgressRouter envtest tests. The tests play the kubelet and Multus: they mark the
// router's pod Ready and write the network-status Multus would write for its egress attachment.

// egressTimeout bounds how long a test waits for the reconciler.
const egressTimeout = 15 * time.Second

// startEgressManager starts a controller manager for the test and, when the test ends and before
// the manager stops, deletes the test's routers and waits until their finalizers have run.
func startEgressManager(t *testing.T, f *fixture) *runningManager {
	t.Helper()
	m := mustStartManager(t, nil, testOptions())
	t.Cleanup(func() {
		if err := direct.DeleteAllOf(f.ctx, &networkv1.EgressRouter{}, client.InNamespace(f.ns)); err != nil {
			t.Errorf("deleting the routers: %v", err)
			return
		}
		eventually(t, egressTimeout, "routers deleted", func() error {
			var list networkv1.EgressRouterList
			if err := direct.List(f.ctx, &list, client.InNamespace(f.ns)); err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("%d routers remain", len(list.Items))
			}
			return nil
		})
		// envtest runs no garbage collector: the Services would outlive their routers.
		var services corev1.ServiceList
		if err := direct.List(f.ctx, &services, client.InNamespace(f.ns)); err != nil {
			t.Errorf("listing the services: %v", err)
		}
		for i := range services.Items {
			if err := direct.Delete(f.ctx, &services.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting service %s: %v", services.Items[i].Name, err)
			}
		}
	})
	return m
}

// testRouter is a router like OpenShift's example, in the fixture's namespace.
func (f *fixture) testRouter(name string) *networkv1.EgressRouter {
	return &networkv1.EgressRouter{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: networkv1.EgressRouterSpec{
			Mode:             networkv1.EgressRouterModeRedirect,
			NetworkInterface: networkv1.EgressRouterInterface{Macvlan: networkv1.MacvlanConfig{Mode: networkv1.MacvlanModeBridge}},
			Addresses:        []networkv1.EgressRouterAddress{{IP: "192.168.12.99/24", Gateway: "192.168.12.1"}},
			Redirect: &networkv1.RedirectConfig{RedirectRules: []networkv1.L4RedirectRule{
				{DestinationIP: "10.0.0.99", Port: 80, Protocol: networkv1.ProtocolTypeUDP},
				{DestinationIP: "203.0.113.26", Port: 8080, TargetPort: 80, Protocol: networkv1.ProtocolTypeTCP},
			}},
		},
	}
}

// getRouter reads the router from the API server.
func (f *fixture) getRouter(name string) *networkv1.EgressRouter {
	f.t.Helper()
	r := &networkv1.EgressRouter{}
	if err := direct.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, r); err != nil {
		f.t.Fatalf("getting router %s: %v", name, err)
	}
	return r
}

// waitCondition waits until the router's condition typ has status and reason at its current generation.
func (f *fixture) waitCondition(name, typ string, status metav1.ConditionStatus, reason string) *networkv1.EgressRouter {
	f.t.Helper()
	var r *networkv1.EgressRouter
	eventually(f.t, egressTimeout, fmt.Sprintf("router %s %s=%s (%s)", name, typ, status, reason), func() error {
		r = &networkv1.EgressRouter{}
		if err := direct.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, r); err != nil {
			return err
		}
		c := meta.FindStatusCondition(r.Status.Conditions, typ)
		switch {
		case c == nil:
			return fmt.Errorf("no %s condition in %+v", typ, r.Status.Conditions)
		case c.Status != status || c.Reason != reason:
			return fmt.Errorf("%s=%s (%s: %s)", typ, c.Status, c.Reason, c.Message)
		case c.ObservedGeneration != r.Generation || r.Status.ObservedGeneration != r.Generation:
			return fmt.Errorf("observed generation %d/%d, want %d", c.ObservedGeneration, r.Status.ObservedGeneration, r.Generation)
		}
		return nil
	})
	return r
}

// waitPod waits for the router's pod and returns it; with notUID set, a pod of another UID.
func (f *fixture) waitPod(name string, notUID string) *corev1.Pod {
	f.t.Helper()
	pod := &corev1.Pod{}
	eventually(f.t, egressTimeout, "pod "+name, func() error {
		if err := direct.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, pod); err != nil {
			return err
		}
		if string(pod.UID) == notUID {
			return fmt.Errorf("pod %s is still the old one", name)
		}
		return nil
	})
	return pod
}

// playKubelet marks the pod Running and Ready, and writes the network-status Multus writes: the
// cluster interface and the egress attachment with ips on net1.
func (f *fixture) playKubelet(pod *corev1.Pod, ips ...string) {
	f.t.Helper()
	statuses := []nadv1.NetworkStatus{
		{Name: "cluster", Interface: "eth0", IPs: []string{"10.244.0.5"}, Default: true},
		{Name: pod.Namespace + "/" + pod.Name, Interface: "net1", IPs: ips, Mac: "0a:58:c0:a8:0c:63"},
	}
	data, err := json.Marshal(statuses)
	if err != nil {
		f.t.Fatal(err)
	}
	f.setPodReady(pod, string(data))
}

// setPodReady writes the network-status annotation (unless empty) and marks the pod Ready.
func (f *fixture) setPodReady(pod *corev1.Pod, networkStatus string) {
	f.t.Helper()
	if networkStatus != "" {
		base := pod.DeepCopy()
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[nadv1.NetworkStatusAnnot] = networkStatus
		if err := direct.Patch(f.ctx, pod, client.MergeFrom(base)); err != nil {
			f.t.Fatalf("writing the network-status of pod %s: %v", pod.Name, err)
		}
	}
	base := pod.DeepCopy()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := direct.Status().Patch(f.ctx, pod, client.MergeFrom(base)); err != nil {
		f.t.Fatalf("marking pod %s Ready: %v", pod.Name, err)
	}
}

// routerIPs are the bare addresses of the router's addresses, as Multus lists them.
func routerIPs(addresses []networkv1.EgressRouterAddress) []string {
	var ips []string
	for _, a := range addresses {
		ips = append(ips, netip.MustParsePrefix(a.IP).Addr().String())
	}
	return ips
}

// bringUp waits for the router's pod, plays the kubelet with the router's spec addresses and waits
// for Available; it returns the pod.
func (f *fixture) bringUp(name string) *corev1.Pod {
	f.t.Helper()
	pod := f.waitPod(name, "")
	r := f.getRouter(name)
	f.playKubelet(pod, routerIPs(r.Spec.Addresses)...)
	f.waitCondition(name, networkv1.EgressRouterAvailable, metav1.ConditionTrue, networkv1.ReasonRouterReady)
	return pod
}

// checkOwned fails unless obj is controlled by r with blockOwnerDeletion.
func checkOwned(t *testing.T, obj client.Object, r *networkv1.EgressRouter) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.UID != r.UID || ref.Kind != "EgressRouter" || ref.APIVersion != "network.netpool.io/v1" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Fatalf("%T %s: controller reference %+v, want router %s (%s) with blockOwnerDeletion", obj, obj.GetName(), ref, r.Name, r.UID)
	}
}

// mustNotExist fails unless obj (by key) does not exist.
func (f *fixture) mustNotExist(obj client.Object, name string) {
	f.t.Helper()
	err := direct.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, obj)
	if !apierrors.IsNotFound(err) {
		f.t.Fatalf("%T %s: got %v, want NotFound", obj, name, err)
	}
}
