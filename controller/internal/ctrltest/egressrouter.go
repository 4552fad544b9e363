package ctrltest

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/test/poll"
)

// Helpers of the EgressRouter envtest tests. The tests play the kubelet and Multus: they mark the
// router's pod Ready and write the network-status Multus would write for its egress attachment.

// EgressTimeout bounds how long a test waits for the EgressRouter reconciler.
const EgressTimeout = 15 * time.Second

// TestRouter is a router like OpenShift's example, in the fixture's namespace.
func (f *Fixture) TestRouter(name string) *networkv1.EgressRouter {
	return &networkv1.EgressRouter{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.NS, Name: name},
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

// GetRouter reads the router from the API server.
func (f *Fixture) GetRouter(name string) *networkv1.EgressRouter {
	f.T.Helper()
	r := &networkv1.EgressRouter{}
	if err := f.C.Get(f.Ctx, client.ObjectKey{Namespace: f.NS, Name: name}, r); err != nil {
		f.T.Fatalf("getting router %s: %v", name, err)
	}
	return r
}

// WaitCondition waits until the router's condition typ has status and reason at its current generation.
func (f *Fixture) WaitCondition(name, typ string, status metav1.ConditionStatus, reason string) *networkv1.EgressRouter {
	f.T.Helper()
	var r *networkv1.EgressRouter
	poll.Eventually(f.T, EgressTimeout, fmt.Sprintf("router %s %s=%s (%s)", name, typ, status, reason), func() error {
		r = &networkv1.EgressRouter{}
		if err := f.C.Get(f.Ctx, client.ObjectKey{Namespace: f.NS, Name: name}, r); err != nil {
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

// WaitPod waits for the router's pod and returns it; with notUID set, a pod of another UID.
func (f *Fixture) WaitPod(name string, notUID string) *corev1.Pod {
	f.T.Helper()
	pod := &corev1.Pod{}
	poll.Eventually(f.T, EgressTimeout, "pod "+name, func() error {
		if err := f.C.Get(f.Ctx, client.ObjectKey{Namespace: f.NS, Name: name}, pod); err != nil {
			return err
		}
		if string(pod.UID) == notUID {
			return fmt.Errorf("pod %s is still the old one", name)
		}
		return nil
	})
	return pod
}

// PlayKubelet marks the pod Running and Ready, and writes the network-status Multus writes: the
// cluster interface and the egress attachment with ips on net1.
func (f *Fixture) PlayKubelet(pod *corev1.Pod, ips ...string) {
	f.T.Helper()
	statuses := []nadv1.NetworkStatus{
		{Name: "cluster", Interface: "eth0", IPs: []string{"10.244.0.5"}, Default: true},
		{Name: pod.Namespace + "/" + pod.Name, Interface: "net1", IPs: ips, Mac: "0a:58:c0:a8:0c:63"},
	}
	data, err := json.Marshal(statuses)
	if err != nil {
		f.T.Fatal(err)
	}
	f.SetPodReady(pod, string(data))
}

// SetPodReady writes the network-status annotation (unless empty) and marks the pod Ready.
func (f *Fixture) SetPodReady(pod *corev1.Pod, networkStatus string) {
	f.T.Helper()
	if networkStatus != "" {
		base := pod.DeepCopy()
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[nadv1.NetworkStatusAnnot] = networkStatus
		if err := f.C.Patch(f.Ctx, pod, client.MergeFrom(base)); err != nil {
			f.T.Fatalf("writing the network-status of pod %s: %v", pod.Name, err)
		}
	}
	base := pod.DeepCopy()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := f.C.Status().Patch(f.Ctx, pod, client.MergeFrom(base)); err != nil {
		f.T.Fatalf("marking pod %s Ready: %v", pod.Name, err)
	}
}

// RouterIPs are the bare addresses of the router's addresses, as Multus lists them.
func RouterIPs(addresses []networkv1.EgressRouterAddress) []string {
	var ips []string
	for _, a := range addresses {
		ips = append(ips, netip.MustParsePrefix(a.IP).Addr().String())
	}
	return ips
}

// BringUp waits for the router's pod, plays the kubelet with the router's spec addresses and waits
// for Available; it returns the pod.
func (f *Fixture) BringUp(name string) *corev1.Pod {
	f.T.Helper()
	pod := f.WaitPod(name, "")
	r := f.GetRouter(name)
	f.PlayKubelet(pod, RouterIPs(r.Spec.Addresses)...)
	f.WaitCondition(name, networkv1.EgressRouterAvailable, metav1.ConditionTrue, networkv1.ReasonRouterReady)
	return pod
}

// MustNotExist fails unless obj (by key) does not exist.
func (f *Fixture) MustNotExist(obj client.Object, name string) {
	f.T.Helper()
	err := f.C.Get(f.Ctx, client.ObjectKey{Namespace: f.NS, Name: name}, obj)
	if !apierrors.IsNotFound(err) {
		f.T.Fatalf("%T %s: got %v, want NotFound", obj, name, err)
	}
}
