package controller

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

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
)

// The EgressRouter reconciler against a real kube-apiserver, with the tests playing the kubelet.

func TestEgressRouterOpenShiftExampleBecomesAvailable(t *testing.T) {
	f := newFixture(t, nil)
	startEgressManager(t, f)
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(readOpenShiftExample(t), &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(f.ns)
	f.create(u)
	const name = "egress-router-redirect"
	f.waitCondition(name, networkv1.EgressRouterAvailable, metav1.ConditionFalse, networkv1.ReasonPodNotReady)
	r := f.waitCondition(name, networkv1.EgressRouterProgressing, metav1.ConditionTrue, networkv1.ReasonCreatingPod)

	nad := &nadv1.NetworkAttachmentDefinition{}
	if err := direct.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, nad); err != nil {
		t.Fatal(err)
	}
	wantConfig := `{"cniVersion":"1.1.0","name":"egress-router-redirect","type":"netpool-egress-router",` +
		`"interface":{"type":"macvlan","master":"","mode":"bridge","mtu":0},"clusterInterface":"eth0",` +
		`"addresses":[{"ip":"192.168.12.99/24","gateway":"192.168.12.1"}],` +
		`"redirect":{"rules":[{"destinationIP":"10.0.0.99","port":80,"protocol":"UDP","targetPort":80},` +
		`{"destinationIP":"203.0.113.26","port":8080,"protocol":"TCP","targetPort":80},` +
		`{"destinationIP":"203.0.113.27","port":8443,"protocol":"TCP","targetPort":443}]},` +
		`"macSeed":"` + f.ns + `/egress-router-redirect"}`
	if nad.Spec.Config != wantConfig {
		t.Errorf("NAD config\n got %s\nwant %s", nad.Spec.Config, wantConfig)
	}
	checkOwned(t, nad, r)

	pod := f.waitPod(name, "")
	checkOwned(t, pod, r)
	wantNetworks := `[{"name":"egress-router-redirect","namespace":"` + f.ns + `","interface":"net1"}]`
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
	if err := direct.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	checkOwned(t, svc, r)
	if got := servicePorts(svc); !slices.Equal(got, []string{"udp-80 UDP 80->80", "tcp-8080 TCP 8080->8080", "tcp-8443 TCP 8443->8443"}) {
		t.Errorf("service ports %q", got)
	}
	if svc.Spec.Selector[networkv1.RouterLabel] != name {
		t.Errorf("service selector %v", svc.Spec.Selector)
	}

	f.playKubelet(pod, "192.168.12.99")
	r = f.waitCondition(name, networkv1.EgressRouterAvailable, metav1.ConditionTrue, networkv1.ReasonRouterReady)
	f.waitCondition(name, networkv1.EgressRouterProgressing, metav1.ConditionFalse, networkv1.ReasonAsExpected)
	f.waitCondition(name, networkv1.EgressRouterDegraded, metav1.ConditionFalse, networkv1.ReasonAsExpected)
	if len(r.Status.Addresses) != 1 || r.Status.Addresses[0].IP != "192.168.12.99/24" {
		t.Errorf("status addresses %+v", r.Status.Addresses)
	}
	eventually(t, egressTimeout, "Available event", func() error {
		if len(eventsFor(t, r.UID, corev1.EventTypeNormal, EventEgressAvailable)) == 0 {
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
	if c.Image != DefaultEgressRouterImage {
		t.Errorf("image %s, want %s", c.Image, DefaultEgressRouterImage)
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

func watchPods(t *testing.T, f *fixture) *podEvents {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: direct.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(f.ctx, &corev1.PodList{}, client.InNamespace(f.ns))
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
	timeout := time.After(egressTimeout)
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
			t.Fatalf("no %q within %s; seen %q", want, egressTimeout, seen)
		}
	}
}

func TestEgressRouterUpdateReplacesThePodAfterTheOldOneIsGone(t *testing.T) {
	f := newFixture(t, nil)
	startEgressManager(t, f)
	f.create(f.testRouter("er"))
	oldPod := f.bringUp("er")
	nad := &nadv1.NetworkAttachmentDefinition{}
	if err := direct.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "er"}, nad); err != nil {
		t.Fatal(err)
	}
	oldConfig := nad.Spec.Config
	events := watchPods(t, f)

	r := f.getRouter("er")
	r.Spec.Redirect.RedirectRules = append(r.Spec.Redirect.RedirectRules,
		networkv1.L4RedirectRule{DestinationIP: "203.0.113.27", Port: 8443, TargetPort: 443, Protocol: networkv1.ProtocolTypeSCTP})
	r.Spec.Redirect.RedirectRules[0].DestinationIP = "10.0.0.100"
	if err := direct.Update(f.ctx, r); err != nil {
		t.Fatal(err)
	}
	f.waitCondition("er", networkv1.EgressRouterProgressing, metav1.ConditionTrue, networkv1.ReasonCreatingPod)
	newPod := f.waitPod("er", string(oldPod.UID))
	seen := events.waitFor(t, "ADDED "+string(newPod.UID))
	if !slices.Contains(seen, "DELETED "+string(oldPod.UID)) {
		t.Fatalf("the new pod was created before the old one was gone: %q", seen)
	}
	if newPod.Annotations[networkv1.ConfigHashAnnotation] == oldPod.Annotations[networkv1.ConfigHashAnnotation] {
		t.Errorf("the config hash did not change")
	}
	if err := direct.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "er"}, nad); err != nil {
		t.Fatal(err)
	}
	if nad.Spec.Config == oldConfig || !strings.Contains(nad.Spec.Config, `{"destinationIP":"10.0.0.100","port":80,"protocol":"UDP","targetPort":80}`) ||
		!strings.Contains(nad.Spec.Config, `{"destinationIP":"203.0.113.27","port":8443,"protocol":"SCTP","targetPort":443}`) {
		t.Errorf("the NAD config did not follow the rules: %s", nad.Spec.Config)
	}
	svc := &corev1.Service{}
	if err := direct.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "er"}, svc); err != nil {
		t.Fatal(err)
	}
	if got := servicePorts(svc); !slices.Equal(got, []string{"udp-80 UDP 80->80", "tcp-8080 TCP 8080->8080", "sctp-8443 SCTP 8443->8443"}) {
		t.Errorf("service ports %q", got)
	}
	f.playKubelet(newPod, "192.168.12.99")
	f.waitCondition("er", networkv1.EgressRouterAvailable, metav1.ConditionTrue, networkv1.ReasonRouterReady)
	if len(eventsFor(t, r.UID, corev1.EventTypeNormal, EventEgressReplacingPod)) == 0 {
		t.Errorf("no %s event", EventEgressReplacingPod)
	}

	// Down to a fallback only: the Service becomes headless (a new Service, as clusterIP cannot change).
	r = f.getRouter("er")
	r.Spec.Redirect = &networkv1.RedirectConfig{FallbackIP: "203.0.113.30"}
	if err := direct.Update(f.ctx, r); err != nil {
		t.Fatal(err)
	}
	eventually(t, egressTimeout, "headless service", func() error {
		if err := direct.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "er"}, svc); err != nil {
			return err
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Ports) != 0 {
			return fmt.Errorf("clusterIP %s, ports %q", svc.Spec.ClusterIP, servicePorts(svc))
		}
		return nil
	})
}

func TestEgressRouterRepairsDriftOfEveryChild(t *testing.T) {
	f := newFixture(t, nil)
	startEgressManager(t, f)
	f.create(f.testRouter("er"))
	pod := f.bringUp("er")
	r := f.getRouter("er")
	key := client.ObjectKey{Namespace: f.ns, Name: "er"}

	t.Run("NAD deleted", func(t *testing.T) {
		nad := &nadv1.NetworkAttachmentDefinition{}
		if err := direct.Get(f.ctx, key, nad); err != nil {
			t.Fatal(err)
		}
		if err := direct.Delete(f.ctx, nad); err != nil {
			t.Fatal(err)
		}
		eventually(t, egressTimeout, "NAD back", func() error {
			back := &nadv1.NetworkAttachmentDefinition{}
			if err := direct.Get(f.ctx, key, back); err != nil {
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
		if err := direct.Get(f.ctx, key, nad); err != nil {
			t.Fatal(err)
		}
		want := nad.Spec.Config
		nad.Spec.Config = `{"cniVersion":"1.1.0","name":"er","type":"macvlan"}`
		if err := direct.Update(f.ctx, nad); err != nil {
			t.Fatal(err)
		}
		eventually(t, egressTimeout, "NAD config restored", func() error {
			if err := direct.Get(f.ctx, key, nad); err != nil {
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
		if err := direct.Get(f.ctx, key, svc); err != nil {
			t.Fatal(err)
		}
		svc.Spec.Ports[0].Port = 9999
		svc.Spec.Selector = map[string]string{"app": "other"}
		if err := direct.Update(f.ctx, svc); err != nil {
			t.Fatal(err)
		}
		eventually(t, egressTimeout, "Service restored", func() error {
			if err := direct.Get(f.ctx, key, svc); err != nil {
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
		if err := direct.Get(f.ctx, key, svc); err != nil {
			t.Fatal(err)
		}
		if err := direct.Delete(f.ctx, svc); err != nil {
			t.Fatal(err)
		}
		eventually(t, egressTimeout, "Service back", func() error {
			back := &corev1.Service{}
			if err := direct.Get(f.ctx, key, back); err != nil {
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
		if err := direct.Get(f.ctx, key, pod); err != nil {
			t.Fatal(err)
		}
		base := pod.DeepCopy()
		delete(pod.Labels, networkv1.RouterLabel)
		if err := direct.Patch(f.ctx, pod, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		eventually(t, egressTimeout, "pod label restored", func() error {
			if err := direct.Get(f.ctx, key, pod); err != nil {
				return err
			}
			if pod.Labels[networkv1.RouterLabel] != "er" || pod.UID != base.UID {
				return fmt.Errorf("labels %v uid %s", pod.Labels, pod.UID)
			}
			return nil
		})
	})
	t.Run("pod deleted", func(t *testing.T) {
		if err := direct.Delete(f.ctx, pod); err != nil {
			t.Fatal(err)
		}
		f.waitCondition("er", networkv1.EgressRouterAvailable, metav1.ConditionFalse, networkv1.ReasonPodNotReady)
		back := f.waitPod("er", string(pod.UID))
		checkOwned(t, back, r)
	})
}

func TestEgressRouterFailures(t *testing.T) {
	f := newFixture(t, nil)
	startEgressManager(t, f)

	t.Run("address not on the egress interface", func(t *testing.T) {
		f.create(f.testRouter("na"))
		pod := f.waitPod("na", "")
		f.playKubelet(pod, "192.168.12.98")
		r := f.waitCondition("na", networkv1.EgressRouterAvailable, metav1.ConditionFalse, networkv1.ReasonAddressNotAttached)
		if c := findCondition(r, networkv1.EgressRouterAvailable); !strings.Contains(c.Message, "does not show 192.168.12.99/24 on net1") {
			t.Errorf("message %q", c.Message)
		}
	})
	t.Run("Ready without network-status", func(t *testing.T) {
		f.create(f.testRouter("ns"))
		pod := f.waitPod("ns", "")
		f.setPodReady(pod, "")
		f.waitCondition("ns", networkv1.EgressRouterAvailable, metav1.ConditionFalse, networkv1.ReasonAddressNotAttached)
	})
	t.Run("pod failed", func(t *testing.T) {
		f.create(f.testRouter("pf"))
		pod := f.bringUp("pf")
		base := pod.DeepCopy()
		pod.Status.Phase = corev1.PodFailed
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
		if err := direct.Status().Patch(f.ctx, pod, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		r := f.waitCondition("pf", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonPodFailed)
		next := f.waitPod("pf", string(pod.UID))
		if len(eventsFor(t, r.UID, corev1.EventTypeWarning, EventEgressPodFailed)) == 0 {
			t.Errorf("no %s event", EventEgressPodFailed)
		}
		f.playKubelet(next, "192.168.12.99")
		f.waitCondition("pf", networkv1.EgressRouterDegraded, metav1.ConditionFalse, networkv1.ReasonAsExpected)
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
	f := newFixture(t, nil)
	startEgressManager(t, f)
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "er", Labels: map[string]string{"owner": "someone"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}},
	}
	f.create(foreign)
	f.create(f.testRouter("er"))
	r := f.waitCondition("er", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonNameConflict)
	if c := findCondition(r, networkv1.EgressRouterDegraded); c.Message != "Service "+f.ns+"/er exists and is not controlled by this router; it is left untouched" {
		t.Errorf("message %q", c.Message)
	}
	consistently(t, 2*time.Second, "the foreign Service untouched, no NAD or pod made", func() error {
		svc := &corev1.Service{}
		if err := direct.Get(f.ctx, client.ObjectKeyFromObject(foreign), svc); err != nil {
			return err
		}
		if len(svc.OwnerReferences) > 0 || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || len(svc.Spec.Selector) > 0 {
			return fmt.Errorf("the foreign Service was changed: %+v", svc)
		}
		for _, obj := range []client.Object{&nadv1.NetworkAttachmentDefinition{}, &corev1.Pod{}} {
			if err := direct.Get(f.ctx, client.ObjectKeyFromObject(foreign), obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T: got %v, want NotFound", obj, err)
			}
		}
		return nil
	})
	if len(eventsFor(t, r.UID, corev1.EventTypeWarning, networkv1.ReasonNameConflict)) == 0 {
		t.Errorf("no %s event", networkv1.ReasonNameConflict)
	}
	// The conflict ends when the foreign object leaves.
	if err := direct.Delete(f.ctx, foreign); err != nil {
		t.Fatal(err)
	}
	f.bringUp("er")
	f.waitCondition("er", networkv1.EgressRouterDegraded, metav1.ConditionFalse, networkv1.ReasonAsExpected)

	// A foreign pod is not adopted either.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "other"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	f.create(pod)
	other := f.testRouter("other")
	f.create(other)
	f.waitCondition("other", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonNameConflict)
	if err := direct.Get(f.ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.OwnerReferences) > 0 || pod.Annotations[networkv1.ConfigHashAnnotation] != "" {
		t.Errorf("the foreign pod was adopted: %+v", pod.ObjectMeta)
	}
}

func TestEgressRouterTwoRoutersInOneNamespace(t *testing.T) {
	f := newFixture(t, nil)
	startEgressManager(t, f)
	a, b := f.testRouter("a"), f.testRouter("b")
	b.Spec.Addresses = []networkv1.EgressRouterAddress{{IP: "192.168.12.98/24", Gateway: "192.168.12.1"}}
	f.create(a)
	f.create(b)
	f.bringUp("a")
	podB := f.bringUp("b")
	nadB := &nadv1.NetworkAttachmentDefinition{}
	if err := direct.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "b"}, nadB); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(nadB.Spec.Config, "192.168.12.98/24") {
		t.Errorf("NAD b: %s", nadB.Spec.Config)
	}
	if err := direct.Delete(f.ctx, a); err != nil {
		t.Fatal(err)
	}
	eventually(t, egressTimeout, "router a gone", func() error {
		if err := direct.Get(f.ctx, client.ObjectKeyFromObject(a), &networkv1.EgressRouter{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})
	f.mustNotExist(&corev1.Pod{}, "a")
	consistently(t, time.Second, "router b untouched", func() error {
		pod := &corev1.Pod{}
		if err := direct.Get(f.ctx, client.ObjectKeyFromObject(podB), pod); err != nil {
			return err
		}
		if pod.UID != podB.UID {
			return fmt.Errorf("pod b was replaced")
		}
		nad := &nadv1.NetworkAttachmentDefinition{}
		if err := direct.Get(f.ctx, client.ObjectKeyFromObject(nadB), nad); err != nil {
			return err
		}
		if nad.Spec.Config != nadB.Spec.Config {
			return fmt.Errorf("NAD b changed")
		}
		return nil
	})
	f.waitCondition("b", networkv1.EgressRouterAvailable, metav1.ConditionTrue, networkv1.ReasonRouterReady)
}

func TestEgressRouterDeleteRemovesThePodFirst(t *testing.T) {
	f := newFixture(t, nil)
	startEgressManager(t, f)
	f.create(f.testRouter("er"))
	pod := f.bringUp("er")
	r := f.getRouter("er")
	if !slices.Contains(r.Finalizers, networkv1.ReleaseAddressFinalizer) {
		t.Fatalf("finalizers %v, want %s", r.Finalizers, networkv1.ReleaseAddressFinalizer)
	}
	if err := direct.Delete(f.ctx, r); err != nil {
		t.Fatal(err)
	}
	eventually(t, egressTimeout, "router gone", func() error {
		if err := direct.Get(f.ctx, client.ObjectKeyFromObject(r), &networkv1.EgressRouter{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})
	f.mustNotExist(&corev1.Pod{}, pod.Name)
	// The NAD and the Service are the garbage collector's (envtest runs none): they point at the router.
	nad := &nadv1.NetworkAttachmentDefinition{}
	if err := direct.Get(f.ctx, client.ObjectKeyFromObject(r), nad); err != nil {
		t.Fatal(err)
	}
	checkOwned(t, nad, r)
}

func TestEgressRouterPool(t *testing.T) {
	f := newFixture(t, nil)
	startEgressManager(t, f)
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-egress"},
		Spec: ipamv1.IPPoolSpec{Range: "192.168.50.0/29", Gateway: "192.168.50.1", NetworkName: "ext"}}
	f.create(pool)
	noGateway := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-nogw"}, Spec: ipamv1.IPPoolSpec{Range: "192.168.51.0/29"}}
	f.create(noGateway)
	f.node("node-a") // the holder of the reservations the test makes, so node reclaim keeps them

	t.Run("allocated from the pool", func(t *testing.T) {
		r := f.testRouter("alloc")
		r.Spec.Addresses, r.Spec.Pool = nil, pool.Name
		r.Spec.Redirect.RedirectRules = r.Spec.Redirect.RedirectRules[1:]
		f.create(r)
		pod := f.waitPod("alloc", "")
		r = f.getRouter("alloc")
		eventually(t, egressTimeout, "allocated address in status", func() error {
			r = f.getRouter("alloc")
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
		if err := direct.Get(f.ctx, client.ObjectKey{Name: name}, res); err != nil {
			t.Fatalf("reservation %s: %v", name, err)
		}
		if res.Labels[networkv1.RouterUIDLabel] != string(r.UID) || res.Spec.Pool != pool.Name || res.Spec.PodRef != "" {
			t.Errorf("reservation %+v", res)
		}
		// No attachment can be handed it: the agent's claim of the same name fails.
		claim := newReservation(pool.Name, "192.168.50.2", nil, "node-a")
		claim.Name, claim.Spec.NetworkName = name, "ext"
		if err := direct.Create(f.ctx, claim); !apierrors.IsAlreadyExists(err) {
			t.Fatalf("another claim of 192.168.50.2: got %v, want AlreadyExists", err)
		}
		f.playKubelet(pod, "192.168.50.2")
		f.waitCondition("alloc", networkv1.EgressRouterAvailable, metav1.ConditionTrue, networkv1.ReasonRouterReady)
		nad := &nadv1.NetworkAttachmentDefinition{}
		if err := direct.Get(f.ctx, client.ObjectKeyFromObject(pod), nad); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(nad.Spec.Config, `"addresses":[{"ip":"192.168.50.2/29","gateway":"192.168.50.1"}]`) {
			t.Errorf("NAD config %s", nad.Spec.Config)
		}
	})
	t.Run("a taken address", func(t *testing.T) {
		r := f.testRouter("taken")
		r.Spec.Addresses = []networkv1.EgressRouterAddress{{IP: "192.168.50.2/29", Gateway: "192.168.50.1"}}
		r.Spec.Redirect.RedirectRules = r.Spec.Redirect.RedirectRules[1:]
		r.Spec.Pool = pool.Name
		f.create(r)
		got := f.waitCondition("taken", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonAddressInUse)
		if c := findCondition(got, networkv1.EgressRouterDegraded); !strings.Contains(c.Message, "address 192.168.50.2 in IPPool "+pool.Name+" is held by egress-router."+f.ns+".alloc") {
			t.Errorf("message %q", c.Message)
		}
		f.mustNotExist(&corev1.Pod{}, "taken")
		if err := direct.Delete(f.ctx, got); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a static address is claimed", func(t *testing.T) {
		r := f.testRouter("static")
		r.Spec.Addresses = []networkv1.EgressRouterAddress{{IP: "192.168.50.5/29", Gateway: "192.168.50.1"}}
		r.Spec.Redirect.RedirectRules = r.Spec.Redirect.RedirectRules[1:]
		r.Spec.Pool = pool.Name
		f.create(r)
		f.waitPod("static", "")
		if err := direct.Get(f.ctx, client.ObjectKey{Name: ipamv1.ReservationName("ext", netipAddr("192.168.50.5"))}, &ipamv1.OverlappingRangeIPReservation{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("an address outside the pool", func(t *testing.T) {
		r := f.testRouter("outside")
		r.Spec.Pool = pool.Name
		f.create(r)
		got := f.waitCondition("outside", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonAddressNotInPool)
		if c := findCondition(got, networkv1.EgressRouterDegraded); !strings.Contains(c.Message, "192.168.12.99 is outside range 192.168.50.0/29") {
			t.Errorf("message %q", c.Message)
		}
	})
	t.Run("a pool that does not exist", func(t *testing.T) {
		r := f.testRouter("nopool")
		r.Spec.Pool = "no-such-pool"
		f.create(r)
		got := f.waitCondition("nopool", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonPoolNotFound)
		if c := findCondition(got, networkv1.EgressRouterAvailable); c.Status != metav1.ConditionFalse || c.Reason != networkv1.ReasonPoolNotFound {
			t.Errorf("Available %+v", c)
		}
		if len(eventsFor(t, got.UID, corev1.EventTypeWarning, networkv1.ReasonPoolNotFound)) == 0 {
			t.Errorf("no %s event", networkv1.ReasonPoolNotFound)
		}
	})
	t.Run("a pool without gateway", func(t *testing.T) {
		r := f.testRouter("nogw")
		r.Spec.Addresses, r.Spec.Pool = nil, noGateway.Name
		r.Spec.Redirect.RedirectRules = r.Spec.Redirect.RedirectRules[1:]
		f.create(r)
		f.waitCondition("nogw", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonPoolInvalid)
	})
	t.Run("an exhausted pool", func(t *testing.T) {
		// 192.168.50.0/29 hands out .2-.6 (.1 is the gateway); alloc has .2 and static .5.
		for _, a := range []string{"192.168.50.3", "192.168.50.4", "192.168.50.6"} {
			res := newReservation(pool.Name, a, nil, "node-a")
			res.Name, res.Spec.NetworkName = ipamv1.ReservationName("ext", netipAddr(a)), "ext"
			f.create(res)
		}
		r := f.testRouter("full")
		r.Spec.Addresses, r.Spec.Pool = nil, pool.Name
		r.Spec.Redirect.RedirectRules = r.Spec.Redirect.RedirectRules[1:]
		f.create(r)
		got := f.waitCondition("full", networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonPoolExhausted)
		if c := findCondition(got, networkv1.EgressRouterDegraded); c.Message != "IPPool "+pool.Name+" (range 192.168.50.0/29) has no free address" {
			t.Errorf("message %q", c.Message)
		}
	})
	t.Run("deleting a router releases its address", func(t *testing.T) {
		r := f.getRouter("alloc")
		if err := direct.Delete(f.ctx, r); err != nil {
			t.Fatal(err)
		}
		eventually(t, egressTimeout, "reservation released", func() error {
			res := &ipamv1.OverlappingRangeIPReservation{}
			err := direct.Get(f.ctx, client.ObjectKey{Name: ipamv1.ReservationName("ext", netipAddr("192.168.50.2"))}, res)
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
		full := f.waitCondition("full", networkv1.EgressRouterDegraded, metav1.ConditionFalse, networkv1.ReasonAsExpected)
		if len(full.Status.Addresses) != 1 || full.Status.Addresses[0].IP != "192.168.50.2/29" {
			t.Errorf("router full got %+v", full.Status.Addresses)
		}
	})
}

func netipAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// readOpenShiftExample reads OpenShift's documented EgressRouter with only its apiVersion changed.
func readOpenShiftExample(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "crds", "network", "v1", "testdata", "openshift-example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
