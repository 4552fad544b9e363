package poolstatus

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// controllerNamespace is the namespace deploy/ runs the controller in.
const controllerNamespace = "netpool-system"

// TestClusterScopedEventsStayInDefault asks the API server itself where an Event about a
// cluster-scoped IPPool may live. In the controller's namespace it refuses one in every form a
// recorder may send (events.k8s.io/v1, core/v1 with an event time, core/v1 as old clients write
// it), so the controller records pool Events in default (kube-system also takes the forms with an
// event time); there they are accepted and found by the
// field selector docs/controller.md gives (involvedObject.kind, the only one kubectl get events
// accepts: regarding.kind is refused by core/v1).
func TestClusterScopedEventsStayInDefault(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	ctx := context.Background()
	pool := f.Pool("events-home", "10.24.0.0/29", "")
	if err := f.C.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ref := corev1.ObjectReference{APIVersion: ipamv1.GroupVersion.String(), Kind: "IPPool", Name: pool.Name, UID: pool.UID}
	// The three forms, named by name in namespace ns.
	forms := func(ns, name string) map[string]client.Object {
		now := metav1.NowMicro()
		return map[string]client.Object{
			"events.k8s.io/v1": &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-new"},
				EventTime: now, ReportingController: "netpool-controller", ReportingInstance: "test", Action: "Test",
				Reason: EventPoolExhausted, Type: corev1.EventTypeWarning, Regarding: ref},
			"core/v1 with an event time": &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-core-new"},
				EventTime: now, ReportingController: "netpool-controller", ReportingInstance: "test", Action: "Test",
				Reason: EventPoolExhausted, Type: corev1.EventTypeWarning, InvolvedObject: ref},
			"core/v1 without an event time": &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-core-old"},
				Source: corev1.EventSource{Component: "netpool-controller"}, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
				Count: 1, Reason: EventPoolExhausted, Type: corev1.EventTypeWarning, InvolvedObject: ref},
		}
	}

	for form, e := range forms(controllerNamespace, "pool-event-in-controller-ns") {
		err := f.C.Create(ctx, e)
		if err == nil {
			_ = f.C.Delete(ctx, e)
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "does not match event.namespace") {
			t.Errorf("%s Event about IPPool %s in %s: %v; want the API server to refuse it", form, pool.Name, controllerNamespace, err)
		}
	}
	for form, e := range forms(metav1.NamespaceDefault, "pool-event-"+f.NS) {
		if err := f.C.Create(ctx, e); err != nil {
			t.Fatalf("%s Event about IPPool %s in default: %v; want it accepted", form, pool.Name, err)
		}
		t.Cleanup(func() { _ = f.C.Delete(context.Background(), e) })
	}

	// kube-system takes the new forms too; the controller does not use it.
	for _, form := range []string{"events.k8s.io/v1", "core/v1 with an event time"} {
		e := forms(metav1.NamespaceSystem, "pool-event-"+f.NS)[form]
		if err := f.C.Create(ctx, e); err != nil {
			t.Errorf("%s Event about IPPool %s in kube-system: %v; want it accepted", form, pool.Name, err)
			continue
		}
		t.Cleanup(func() { _ = f.C.Delete(context.Background(), e) })
	}

	// kubectl get events -n default --field-selector involvedObject.kind=IPPool (core/v1) finds
	// all three; regarding.kind is a field of events.k8s.io only.
	// byKind lists the Events in default about the pool, selected by the fields of object (the
	// Event's reference to it: involvedObject or regarding).
	byKind := func(list client.ObjectList, object string) (int, error) {
		err := f.C.List(ctx, list, client.InNamespace(metav1.NamespaceDefault),
			client.MatchingFields{object + ".kind": "IPPool", object + ".name": pool.Name})
		if err != nil {
			return 0, err
		}
		switch l := list.(type) {
		case *corev1.EventList:
			return len(l.Items), nil
		case *eventsv1.EventList:
			return len(l.Items), nil
		}
		return 0, nil
	}
	if n, err := byKind(&corev1.EventList{}, "involvedObject"); err != nil || n != 3 {
		t.Errorf("core/v1 Events in default with involvedObject.kind=IPPool of %s: %d, %v; want 3", pool.Name, n, err)
	}
	if n, err := byKind(&eventsv1.EventList{}, "regarding"); err != nil || n != 3 {
		t.Errorf("events.k8s.io/v1 Events in default with regarding.kind=IPPool of %s: %d, %v; want 3", pool.Name, n, err)
	}
	if _, err := byKind(&corev1.EventList{}, "regarding"); !apierrors.IsBadRequest(err) {
		t.Errorf("core/v1 Events with regarding.kind=IPPool: %v; want the API server to refuse the field", err)
	}
}
