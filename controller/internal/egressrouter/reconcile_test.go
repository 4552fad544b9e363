package egressrouter

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/test/poll"
)

// The EgressRouter reconciler against a real kube-apiserver, with the tests playing the kubelet.

func TestEgressRouterOpenShiftExampleBecomesAvailable(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	startEgressManager(t, f)
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(readOpenShiftExample(t), &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(f.NS)
	f.Create(u)
	const name = "egress-router-redirect"
	f.WaitCondition(name, networkv1.EgressRouterAvailable, metav1.ConditionFalse, networkv1.ReasonPodNotReady)
	r := f.WaitCondition(name, networkv1.EgressRouterProgressing, metav1.ConditionTrue, networkv1.ReasonCreatingPod)

	nad := &nadv1.NetworkAttachmentDefinition{}
	if err := f.C.Get(f.Ctx, client.ObjectKey{Namespace: f.NS, Name: name}, nad); err != nil {
		t.Fatal(err)
	}
	wantConfig := `{"cniVersion":"1.1.0","name":"egress-router-redirect","type":"netpool-egress-router",` +
		`"interface":{"type":"macvlan","master":"","mode":"bridge","mtu":0},"clusterInterface":"eth0",` +
		`"addresses":[{"ip":"192.168.12.99/24","gateway":"192.168.12.1"}],` +
		`"redirect":{"rules":[{"destinationIP":"10.0.0.99","port":80,"protocol":"UDP","targetPort":80},` +
		`{"destinationIP":"203.0.113.26","port":8080,"protocol":"TCP","targetPort":80},` +
		`{"destinationIP":"203.0.113.27","port":8443,"protocol":"TCP","targetPort":443}]},` +
		`"macSeed":"` + f.NS + `/egress-router-redirect"}`
	if nad.Spec.Config != wantConfig {
		t.Errorf("NAD config\n got %s\nwant %s", nad.Spec.Config, wantConfig)
	}
	checkOwned(t, nad, r)

	pod := f.WaitPod(name, "")
	checkOwned(t, pod, r)
	wantNetworks := `[{"name":"egress-router-redirect","namespace":"` + f.NS + `","interface":"net1"}]`
	if got := pod.Annotations[nadv1.NetworkAttachmentAnnot]; got != wantNetworks {
		t.Errorf("networks annotation %s, want %s", got, wantNetworks)
	}
	if len(pod.Annotations[networkv1.ConfigHashAnnotation]) != 16 {
		t.Errorf("config hash %q, want 16 hex digits", pod.Annotations[networkv1.ConfigHashAnnotation])
	}
	if pod.Labels[networkv1.RouterLabel] != name {
		t.Errorf("pod labels %v, want %s=%s", pod.Labels, networkv1.RouterLabel, name)
	}
	checkRestricted(t, pod)

	svc := &corev1.Service{}
	if err := f.C.Get(f.Ctx, client.ObjectKey{Namespace: f.NS, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	checkOwned(t, svc, r)
	if got := servicePorts(svc); !slices.Equal(got, []string{"udp-80 UDP 80->80", "tcp-8080 TCP 8080->8080", "tcp-8443 TCP 8443->8443"}) {
		t.Errorf("service ports %q", got)
	}
	if svc.Spec.Selector[networkv1.RouterLabel] != name {
		t.Errorf("service selector %v", svc.Spec.Selector)
	}

	f.PlayKubelet(pod, "192.168.12.99")
	r = f.WaitCondition(name, networkv1.EgressRouterAvailable, metav1.ConditionTrue, networkv1.ReasonRouterReady)
	f.WaitCondition(name, networkv1.EgressRouterProgressing, metav1.ConditionFalse, networkv1.ReasonAsExpected)
	f.WaitCondition(name, networkv1.EgressRouterDegraded, metav1.ConditionFalse, networkv1.ReasonAsExpected)
	if len(r.Status.Addresses) != 1 || r.Status.Addresses[0].IP != "192.168.12.99/24" {
		t.Errorf("status addresses %+v", r.Status.Addresses)
	}
	poll.Eventually(t, ctrltest.EgressTimeout, "Available event", func() error {
		if len(f.EventsFor(r.UID, corev1.EventTypeNormal, EventEgressAvailable)) == 0 {
			return fmt.Errorf("no %s event", EventEgressAvailable)
		}
		return nil
	})
}

// checkRestricted fails unless the pod meets the restricted Pod Security profile.
func checkRestricted(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Fatalf("pod security context %+v, want runAsNonRoot and the RuntimeDefault seccomp profile", sc)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if c.Image != DefaultImage {
		t.Errorf("image %s, want %s", c.Image, DefaultImage)
	}
	csc := c.SecurityContext
	if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || csc.Capabilities == nil ||
		!slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) > 0 || csc.Privileged != nil {
		t.Errorf("container security context %+v, want no privilege escalation and every capability dropped", csc)
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("the pod mounts a service account token")
	}
	if pod.Spec.HostNetwork || len(pod.Spec.Volumes) > 0 {
		t.Errorf("the pod uses the host network or volumes")
	}
}

func servicePorts(svc *corev1.Service) []string {
	var out []string
	for _, p := range svc.Spec.Ports {
		out = append(out, fmt.Sprintf("%s %s %d->%s", p.Name, p.Protocol, p.Port, p.TargetPort.String()))
	}
	return out
}

// podEvents records the pod watch events of one namespace, in order.
type podEvents struct {
	w     watch.Interface
	order chan string
}

func watchPods(t *testing.T, f *ctrltest.Fixture) *podEvents {
	t.Helper()
	wc, err := client.NewWithWatch(f.Env.Config, client.Options{Scheme: f.C.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(f.Ctx, &corev1.PodList{}, client.InNamespace(f.NS))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	p := &podEvents{w: w, order: make(chan string, 1000)}
	go func() {
		defer close(p.order)
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				p.order <- fmt.Sprintf("%s %s", ev.Type, pod.UID)
			}
		}
	}()
	return p
}

// waitFor reads events until want arrives and returns those read, want last.
func (p *podEvents) waitFor(t *testing.T, want string) []string {
	t.Helper()
	var seen []string
	timeout := time.After(ctrltest.EgressTimeout)
	for {
		select {
		case ev, ok := <-p.order:
			if !ok {
				t.Fatalf("the pod watch ended; seen %q", seen)
			}
			seen = append(seen, ev)
			if ev == want {
				return seen
			}
		case <-timeout:
			t.Fatalf("no %q within %s; seen %q", want, ctrltest.EgressTimeout, seen)
		}
	}
}

func TestEgressRouterUpdateReplacesThePodAfterTheOldOneIsGone(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	startEgressManager(t, f)
	f.Create(f.TestRouter("er"))
	oldPod := f.BringUp("er")
	nad := &nadv1.NetworkAttachmentDefinition{}
	if err := f.C.Get(f.Ctx, client.ObjectKey{Namespace: f.NS, Name: "er"}, nad); err != nil {
		t.Fatal(err)
	}
	oldConfig := nad.Spec.Config
	events := watchPods(t, f)

	r := f.GetRouter("er")
	r.Spec.Redirect.RedirectRules = append(r.Spec.Redirect.RedirectRules,
		networkv1.L4RedirectRule{DestinationIP: "203.0.113.27", Port: 8443, TargetPort: 443, Protocol: networkv1.ProtocolTypeSCTP})
	r.Spec.Redirect.RedirectRules[0].DestinationIP = "10.0.0.100"
	if err := f.C.Update(f.Ctx, r); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("er", networkv1.EgressRouterProgressing, metav1.ConditionTrue, networkv1.ReasonCreatingPod)
	newPod := f.WaitPod("er", string(oldPod.UID))
	seen := events.waitFor(t, "ADDED "+string(newPod.UID))
	if !slices.Contains(seen, "DELETED "+string(oldPod.UID)) {
		t.Fatalf("the new pod was created before the old one was gone: %q", seen)
	}
	if newPod.Annotations[networkv1.ConfigHashAnnotation] == oldPod.Annotations[networkv1.ConfigHashAnnotation] {
		t.Errorf("the config hash did not change")
	}
	if err := f.C.Get(f.Ctx, client.ObjectKey{Namespace: f.NS, Name: "er"}, nad); err != nil {
		t.Fatal(err)
	}
	if nad.Spec.Config == oldConfig || !strings.Contains(nad.Spec.Config, `{"destinationIP":"10.0.0.100","port":80,"protocol":"UDP","targetPort":80}`) ||
		!strings.Contains(nad.Spec.Config, `{"destinationIP":"203.0.113.27","port":8443,"protocol":"SCTP","targetPort":443}`) {
		t.Errorf("the NAD config did not follow the rules: %s", nad.Spec.Config)
	}
	svc := &corev1.Service{}
	if err := f.C.Get(f.Ctx, client.ObjectKey{Namespace: f.NS, Name: "er"}, svc); err != nil {
		t.Fatal(err)
	}
	if got := servicePorts(svc); !slices.Equal(got, []string{"udp-80 UDP 80->80", "tcp-8080 TCP 8080->8080", "sctp-8443 SCTP 8443->8443"}) {
		t.Errorf("service ports %q", got)
	}
	f.PlayKubelet(newPod, "192.168.12.99")
	f.WaitCondition("er", networkv1.EgressRouterAvailable, metav1.ConditionTrue, networkv1.ReasonRouterReady)
	if len(f.EventsFor(r.UID, corev1.EventTypeNormal, EventEgressReplacingPod)) == 0 {
		t.Errorf("no %s event", EventEgressReplacingPod)
	}

	// Down to a fallback only: the Service becomes headless (a new Service, as clusterIP cannot change).
	r = f.GetRouter("er")
	r.Spec.Redirect = &networkv1.RedirectConfig{FallbackIP: "203.0.113.30"}
	if err := f.C.Update(f.Ctx, r); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, ctrltest.EgressTimeout, "headless service", func() error {
		if err := f.C.Get(f.Ctx, client.ObjectKey{Namespace: f.NS, Name: "er"}, svc); err != nil {
			return err
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Ports) != 0 {
			return fmt.Errorf("clusterIP %s, ports %q", svc.Spec.ClusterIP, servicePorts(svc))
		}
		return nil
	})
}

func TestEgressRouterRepairsDriftOfEveryChild(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	startEgressManager(t, f)
	f.Create(f.TestRouter("er"))
	pod := f.BringUp("er")
	r := f.GetRouter("er")
	key := client.ObjectKey{Namespace: f.NS, Name: "er"}

	t.Run("NAD deleted", func(t *testing.T) {
		nad := &nadv1.NetworkAttachmentDefinition{}
		if err := f.C.Get(f.Ctx, key, nad); err != nil {
			t.Fatal(err)
		}
		if err := f.C.Delete(f.Ctx, nad); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, ctrltest.EgressTimeout, "NAD back", func() error {
			back := &nadv1.NetworkAttachmentDefinition{}
			if err := f.C.Get(f.Ctx, key, back); err != nil {
				return err
			}
			if back.UID == nad.UID || back.Spec.Config != nad.Spec.Config {
				return fmt.Errorf("not recreated as it was")
			}
			return nil
		})
	})
	t.Run("NAD edited", func(t *testing.T) {
		nad := &nadv1.NetworkAttachmentDefinition{}
		if err := f.C.Get(f.Ctx, key, nad); err != nil {
			t.Fatal(err)
		}
		want := nad.Spec.Config
		nad.Spec.Config = `{"cniVersion":"1.1.0","name":"er","type":"macvlan"}`
		if err := f.C.Update(f.Ctx, nad); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, ctrltest.EgressTimeout, "NAD config restored", func() error {
			if err := f.C.Get(f.Ctx, key, nad); err != nil {
				return err
			}
			if nad.Spec.Config != want {
				return fmt.Errorf("config %s", nad.Spec.Config)
			}
			return nil
		})
	})
	t.Run("Service edited", func(t *testing.T) {
		svc := &corev1.Service{}
		if err := f.C.Get(f.Ctx, key, svc); err != nil {
			t.Fatal(err)
		}
		svc.Spec.Ports[0].Port = 9999
		svc.Spec.Selector = map[string]string{"app": "other"}
		if err := f.C.Update(f.Ctx, svc); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, ctrltest.EgressTimeout, "Service restored", func() error {
			if err := f.C.Get(f.Ctx, key, svc); err != nil {
				return err
			}
			if got := servicePorts(svc); !slices.Equal(got, []string{"udp-80 UDP 80->80", "tcp-8080 TCP 8080->8080"}) {
				return fmt.Errorf("ports %q", got)
			}
			if svc.Spec.Selector[networkv1.RouterLabel] != "er" {
				return fmt.Errorf("selector %v", svc.Spec.Selector)
			}
			return nil
		})
	})
	t.Run("Service deleted", func(t *testing.T) {
		svc := &corev1.Service{}
		if err := f.C.Get(f.Ctx, key, svc); err != nil {
			t.Fatal(err)
		}
		if err := f.C.Delete(f.Ctx, svc); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, ctrltest.EgressTimeout, "Service back", func() error {
			back := &corev1.Service{}
			if err := f.C.Get(f.Ctx, key, back); err != nil {
				return err
			}
			if back.UID == svc.UID {
				return fmt.Errorf("not recreated")
			}
			checkOwned(t, back, r)
			return nil
		})
	})
	t.Run("pod label removed", func(t *testing.T) {
		if err := f.C.Get(f.Ctx, key, pod); err != nil {
			t.Fatal(err)
		}
		base := pod.DeepCopy()
		delete(pod.Labels, networkv1.RouterLabel)
		if err := f.C.Patch(f.Ctx, pod, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, ctrltest.EgressTimeout, "pod label restored", func() error {
			if err := f.C.Get(f.Ctx, key, pod); err != nil {
				return err
			}
			if pod.Labels[networkv1.RouterLabel] != "er" || pod.UID != base.UID {
				return fmt.Errorf("labels %v uid %s", pod.Labels, pod.UID)
			}
			return nil
		})
	})
	t.Run("pod deleted", func(t *testing.T) {
		if err := f.C.Delete(f.Ctx, pod); err != nil {
			t.Fatal(err)
		}
		f.WaitCondition("er", networkv1.EgressRouterAvailable, metav1.ConditionFalse, networkv1.ReasonPodNotReady)
		back := f.WaitPod("er", string(pod.UID))
		checkOwned(t, back, r)
	})
}

func TestEgressRouterFailures(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	startEgressManager(t, f)

	t.Run("address not on the egress interface", func(t *testing.T) {
		f.Create(f.TestRouter("na"))
		pod := f.WaitPod("na", "")
		f.PlayKubelet(pod, "192.168.12.98")
		r := f.WaitCondition("na", networkv1.EgressRouterAvailable, metav1.ConditionFalse, networkv1.ReasonAddressNotAttached)
		if c := findCondition(r, networkv1.EgressRouterAvailable); !strings.Contains(c.Message, "does not show 192.168.12.99/24 on net1") {
			t.Errorf("message %q", c.Message)
		}
	})
	t.Run("Ready without network-status", func(t *testing.T) {
		f.Create(f.TestRouter("ns"))
		pod := f.WaitPod("ns", "")
		f.SetPodReady(pod, "")
		f.WaitCondition("ns", networkv1.EgressRouterAvailable, metav1.ConditionFalse, networkv1.ReasonAddressNotAttached)
	})
	t.Run("pod failed", func(t *testing.T) {
		f.Create(f.TestRouter("pf"))
		pod := f.BringUp("pf")
		base := pod.DeepCopy()
		pod.Status.Phase = corev1.PodFailed
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
		if err := f.C.Status().Patch(f.Ctx, pod, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		r := f.WaitCondition("pf", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonPodFailed)
		next := f.WaitPod("pf", string(pod.UID))
		if len(f.EventsFor(r.UID, corev1.EventTypeWarning, EventEgressPodFailed)) == 0 {
			t.Errorf("no %s event", EventEgressPodFailed)
		}
		f.PlayKubelet(next, "192.168.12.99")
		f.WaitCondition("pf", networkv1.EgressRouterDegraded, metav1.ConditionFalse, networkv1.ReasonAsExpected)
	})
}

func findCondition(r *networkv1.EgressRouter, typ string) metav1.Condition {
	for _, c := range r.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

func TestEgressRouterNameConflict(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	startEgressManager(t, f)
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.NS, Name: "er", Labels: map[string]string{"owner": "someone"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}},
	}
	f.Create(foreign)
	f.Create(f.TestRouter("er"))
	r := f.WaitCondition("er", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonNameConflict)
	if c := findCondition(r, networkv1.EgressRouterDegraded); c.Message != "Service "+f.NS+"/er exists and is not controlled by this router; it is left untouched" {
		t.Errorf("message %q", c.Message)
	}
	poll.Consistently(t, 2*time.Second, "the foreign Service untouched, no NAD or pod made", func() error {
		svc := &corev1.Service{}
		if err := f.C.Get(f.Ctx, client.ObjectKeyFromObject(foreign), svc); err != nil {
			return err
		}
		if len(svc.OwnerReferences) > 0 || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || len(svc.Spec.Selector) > 0 {
			return fmt.Errorf("the foreign Service was changed: %+v", svc)
		}
		for _, obj := range []client.Object{&nadv1.NetworkAttachmentDefinition{}, &corev1.Pod{}} {
			if err := f.C.Get(f.Ctx, client.ObjectKeyFromObject(foreign), obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T: got %v, want NotFound", obj, err)
			}
		}
		return nil
	})
	if len(f.EventsFor(r.UID, corev1.EventTypeWarning, networkv1.ReasonNameConflict)) == 0 {
		t.Errorf("no %s event", networkv1.ReasonNameConflict)
	}
	// The conflict ends when the foreign object leaves.
	if err := f.C.Delete(f.Ctx, foreign); err != nil {
		t.Fatal(err)
	}
	f.BringUp("er")
	f.WaitCondition("er", networkv1.EgressRouterDegraded, metav1.ConditionFalse, networkv1.ReasonAsExpected)

	// A foreign pod is not adopted either.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.NS, Name: "other"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	f.Create(pod)
	other := f.TestRouter("other")
	f.Create(other)
	f.WaitCondition("other", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonNameConflict)
	if err := f.C.Get(f.Ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.OwnerReferences) > 0 || pod.Annotations[networkv1.ConfigHashAnnotation] != "" {
		t.Errorf("the foreign pod was adopted: %+v", pod.ObjectMeta)
	}
}

func TestEgressRouterTwoRoutersInOneNamespace(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	startEgressManager(t, f)
	a, b := f.TestRouter("a"), f.TestRouter("b")
	b.Spec.Addresses = []networkv1.EgressRouterAddress{{IP: "192.168.12.98/24", Gateway: "192.168.12.1"}}
	f.Create(a)
	f.Create(b)
	f.BringUp("a")
	podB := f.BringUp("b")
	nadB := &nadv1.NetworkAttachmentDefinition{}
	if err := f.C.Get(f.Ctx, client.ObjectKey{Namespace: f.NS, Name: "b"}, nadB); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(nadB.Spec.Config, "192.168.12.98/24") {
		t.Errorf("NAD b: %s", nadB.Spec.Config)
	}
	if err := f.C.Delete(f.Ctx, a); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, ctrltest.EgressTimeout, "router a gone", func() error {
		if err := f.C.Get(f.Ctx, client.ObjectKeyFromObject(a), &networkv1.EgressRouter{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})
	f.MustNotExist(&corev1.Pod{}, "a")
	poll.Consistently(t, time.Second, "router b untouched", func() error {
		pod := &corev1.Pod{}
		if err := f.C.Get(f.Ctx, client.ObjectKeyFromObject(podB), pod); err != nil {
			return err
		}
		if pod.UID != podB.UID {
			return fmt.Errorf("pod b was replaced")
		}
		nad := &nadv1.NetworkAttachmentDefinition{}
		if err := f.C.Get(f.Ctx, client.ObjectKeyFromObject(nadB), nad); err != nil {
			return err
		}
		if nad.Spec.Config != nadB.Spec.Config {
			return fmt.Errorf("NAD b changed")
		}
		return nil
	})
	f.WaitCondition("b", networkv1.EgressRouterAvailable, metav1.ConditionTrue, networkv1.ReasonRouterReady)
}

func TestEgressRouterDeleteRemovesThePodFirst(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	startEgressManager(t, f)
	f.Create(f.TestRouter("er"))
	pod := f.BringUp("er")
	r := f.GetRouter("er")
	if !slices.Contains(r.Finalizers, networkv1.ReleaseAddressFinalizer) {
		t.Fatalf("finalizers %v, want %s", r.Finalizers, networkv1.ReleaseAddressFinalizer)
	}
	if err := f.C.Delete(f.Ctx, r); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, ctrltest.EgressTimeout, "router gone", func() error {
		if err := f.C.Get(f.Ctx, client.ObjectKeyFromObject(r), &networkv1.EgressRouter{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})
	f.MustNotExist(&corev1.Pod{}, pod.Name)
	// The NAD and the Service are the garbage collector's (envtest runs none): they point at the router.
	nad := &nadv1.NetworkAttachmentDefinition{}
	if err := f.C.Get(f.Ctx, client.ObjectKeyFromObject(r), nad); err != nil {
		t.Fatal(err)
	}
	checkOwned(t, nad, r)
}

func TestEgressRouterPool(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	startEgressManager(t, f)
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: f.NS + "-egress"},
		Spec: ipamv1.IPPoolSpec{Range: "192.168.50.0/29", Gateway: "192.168.50.1", NetworkName: "ext"}}
	f.Create(pool)
	noGateway := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: f.NS + "-nogw"}, Spec: ipamv1.IPPoolSpec{Range: "192.168.51.0/29"}}
	f.Create(noGateway)
	f.Node("node-a") // the holder of the reservations the test makes, so node reclaim keeps them

	t.Run("allocated from the pool", func(t *testing.T) {
		r := f.TestRouter("alloc")
		r.Spec.Addresses, r.Spec.Pool = nil, pool.Name
		r.Spec.Redirect.RedirectRules = r.Spec.Redirect.RedirectRules[1:]
		f.Create(r)
		pod := f.WaitPod("alloc", "")
		r = f.GetRouter("alloc")
		poll.Eventually(t, ctrltest.EgressTimeout, "allocated address in status", func() error {
			r = f.GetRouter("alloc")
			if len(r.Status.Addresses) != 1 {
				return fmt.Errorf("status addresses %+v", r.Status.Addresses)
			}
			return nil
		})
		if got := r.Status.Addresses[0]; got.IP != "192.168.50.2/29" || got.Gateway != "192.168.50.1" {
			t.Fatalf("allocated %+v, want 192.168.50.2/29 via 192.168.50.1", got)
		}
		res := &ipamv1.OverlappingRangeIPReservation{}
		name := ipamv1.ReservationName("ext", netipAddr("192.168.50.2"))
		if err := f.C.Get(f.Ctx, client.ObjectKey{Name: name}, res); err != nil {
			t.Fatalf("reservation %s: %v", name, err)
		}
		if res.Labels[networkv1.RouterUIDLabel] != string(r.UID) || res.Spec.Pool != pool.Name || res.Spec.PodRef != "" {
			t.Errorf("reservation %+v", res)
		}
		// No attachment can be handed it: the agent's claim of the same name fails.
		claim := ctrltest.NewReservation(pool.Name, "192.168.50.2", nil, "node-a")
		claim.Name, claim.Spec.NetworkName = name, "ext"
		if err := f.C.Create(f.Ctx, claim); !apierrors.IsAlreadyExists(err) {
			t.Fatalf("another claim of 192.168.50.2: got %v, want AlreadyExists", err)
		}
		f.PlayKubelet(pod, "192.168.50.2")
		f.WaitCondition("alloc", networkv1.EgressRouterAvailable, metav1.ConditionTrue, networkv1.ReasonRouterReady)
		nad := &nadv1.NetworkAttachmentDefinition{}
		if err := f.C.Get(f.Ctx, client.ObjectKeyFromObject(pod), nad); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(nad.Spec.Config, `"addresses":[{"ip":"192.168.50.2/29","gateway":"192.168.50.1"}]`) {
			t.Errorf("NAD config %s", nad.Spec.Config)
		}
	})
	t.Run("a taken address", func(t *testing.T) {
		r := f.TestRouter("taken")
		r.Spec.Addresses = []networkv1.EgressRouterAddress{{IP: "192.168.50.2/29", Gateway: "192.168.50.1"}}
		r.Spec.Redirect.RedirectRules = r.Spec.Redirect.RedirectRules[1:]
		r.Spec.Pool = pool.Name
		f.Create(r)
		got := f.WaitCondition("taken", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonAddressInUse)
		if c := findCondition(got, networkv1.EgressRouterDegraded); !strings.Contains(c.Message, "address 192.168.50.2 in IPPool "+pool.Name+" is held by egress-router."+f.NS+".alloc") {
			t.Errorf("message %q", c.Message)
		}
		f.MustNotExist(&corev1.Pod{}, "taken")
		if err := f.C.Delete(f.Ctx, got); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a static address is claimed", func(t *testing.T) {
		r := f.TestRouter("static")
		r.Spec.Addresses = []networkv1.EgressRouterAddress{{IP: "192.168.50.5/29", Gateway: "192.168.50.1"}}
		r.Spec.Redirect.RedirectRules = r.Spec.Redirect.RedirectRules[1:]
		r.Spec.Pool = pool.Name
		f.Create(r)
		f.WaitPod("static", "")
		if err := f.C.Get(f.Ctx, client.ObjectKey{Name: ipamv1.ReservationName("ext", netipAddr("192.168.50.5"))}, &ipamv1.OverlappingRangeIPReservation{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("an address outside the pool", func(t *testing.T) {
		r := f.TestRouter("outside")
		r.Spec.Pool = pool.Name
		f.Create(r)
		got := f.WaitCondition("outside", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonAddressNotInPool)
		if c := findCondition(got, networkv1.EgressRouterDegraded); !strings.Contains(c.Message, "192.168.12.99 is outside range 192.168.50.0/29") {
			t.Errorf("message %q", c.Message)
		}
	})
	t.Run("a pool that does not exist", func(t *testing.T) {
		r := f.TestRouter("nopool")
		r.Spec.Pool = "no-such-pool"
		f.Create(r)
		got := f.WaitCondition("nopool", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonPoolNotFound)
		if c := findCondition(got, networkv1.EgressRouterAvailable); c.Status != metav1.ConditionFalse || c.Reason != networkv1.ReasonPoolNotFound {
			t.Errorf("Available %+v", c)
		}
		if len(f.EventsFor(got.UID, corev1.EventTypeWarning, networkv1.ReasonPoolNotFound)) == 0 {
			t.Errorf("no %s event", networkv1.ReasonPoolNotFound)
		}
	})
	t.Run("a pool without gateway", func(t *testing.T) {
		r := f.TestRouter("nogw")
		r.Spec.Addresses, r.Spec.Pool = nil, noGateway.Name
		r.Spec.Redirect.RedirectRules = r.Spec.Redirect.RedirectRules[1:]
		f.Create(r)
		f.WaitCondition("nogw", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonPoolInvalid)
	})
	t.Run("an exhausted pool", func(t *testing.T) {
		// 192.168.50.0/29 hands out .2-.6 (.1 is the gateway); alloc has .2 and static .5.
		for _, a := range []string{"192.168.50.3", "192.168.50.4", "192.168.50.6"} {
			res := ctrltest.NewReservation(pool.Name, a, nil, "node-a")
			res.Name, res.Spec.NetworkName = ipamv1.ReservationName("ext", netipAddr(a)), "ext"
			f.Create(res)
		}
		r := f.TestRouter("full")
		r.Spec.Addresses, r.Spec.Pool = nil, pool.Name
		r.Spec.Redirect.RedirectRules = r.Spec.Redirect.RedirectRules[1:]
		f.Create(r)
		got := f.WaitCondition("full", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonPoolExhausted)
		if c := findCondition(got, networkv1.EgressRouterDegraded); c.Message != "IPPool "+pool.Name+" (range 192.168.50.0/29) has no free address" {
			t.Errorf("message %q", c.Message)
		}
	})
	t.Run("deleting a router releases its address", func(t *testing.T) {
		r := f.GetRouter("alloc")
		if err := f.C.Delete(f.Ctx, r); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, ctrltest.EgressTimeout, "reservation released", func() error {
			res := &ipamv1.OverlappingRangeIPReservation{}
			err := f.C.Get(f.Ctx, client.ObjectKey{Name: ipamv1.ReservationName("ext", netipAddr("192.168.50.2"))}, res)
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return err
			case res.Labels[networkv1.RouterUIDLabel] == string(r.UID):
				return fmt.Errorf("still held by the deleted router")
			}
			return nil // already claimed again, by the router waiting for an address
		})
		// The freed address goes to the router that waited for one.
		full := f.WaitCondition("full", networkv1.EgressRouterDegraded, metav1.ConditionFalse, networkv1.ReasonAsExpected)
		if len(full.Status.Addresses) != 1 || full.Status.Addresses[0].IP != "192.168.50.2/29" {
			t.Errorf("router full got %+v", full.Status.Addresses)
		}
	})
}

func netipAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// readOpenShiftExample reads OpenShift's documented EgressRouter with only its apiVersion changed.
func readOpenShiftExample(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "crds", "network", "v1", "testdata", "openshift-example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
