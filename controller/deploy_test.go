package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	nadreconciler "github.com/netpool/netpool/controller/internal/nad"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/test/poll"
)

// deployNamespace is where deploy/ runs the controller.
const deployNamespace = "netpool-system"

// controllerManifests are the files of deploy/ that run the controller, in the order an operator
// applies them (deploy/base/crds/ first).
var controllerManifests = []string{"namespace.yaml", "controller-role.yaml", "controller-rbac.yaml", "controller.yaml"}

func TestDeployManifestsApplyWithAServerSideDryRun(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	mustNamespace(f, deployNamespace) // a dry run creates no namespace for the objects in it
	files := []string{}
	crds, err := filepath.Glob(filepath.Join("..", "deploy", "base", "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in deploy/base/crds (%v)", err)
	}
	files = append(files, crds...)
	for _, f := range controllerManifests {
		files = append(files, filepath.Join("..", "deploy", "base", f))
	}
	kinds := map[string]int{}
	for _, path := range files {
		for _, obj := range mustReadManifests(t, path) {
			err := f.C.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj),
				client.FieldOwner("netpool-deploy-test"), client.ForceOwnership, client.DryRunAll)
			if err != nil {
				t.Errorf("%s: %s %s does not apply: %v", path, obj.GetKind(), obj.GetName(), err)
			}
			kinds[obj.GetKind()]++
		}
	}
	for _, k := range []string{"CustomResourceDefinition", "ClusterRole", "Role", "ServiceAccount", "ClusterRoleBinding", "RoleBinding", "Deployment", "Service"} {
		if kinds[k] == 0 {
			t.Errorf("deploy/ has no %s", k)
		}
	}
}

// TestControllerDoesItsJobAsItsServiceAccount applies deploy/'s roles and bindings for real and runs
// the controller with the ServiceAccount's identity: every reconciler must work (a NAD's pool, a
// pool's status, a leak released, a deleted node's slice returned, Events, the leader Lease),
// and the identity may do nothing beyond.
func TestControllerDoesItsJobAsItsServiceAccount(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	mustNamespace(f, deployNamespace)
	for _, name := range controllerManifests[:3] {
		for _, obj := range mustReadManifests(t, filepath.Join("..", "deploy", "base", name)) {
			err := f.C.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj),
				client.FieldOwner("netpool-deploy-test"), client.ForceOwnership)
			if err != nil {
				t.Fatalf("applying %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	kubeconfig := f.Env.ServiceAccountKubeconfig(t, deployNamespace, "netpool-controller")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}

	f.Node("node-a")
	pool := f.Pool("rbac", "10.60.0.0/24", "")
	pod := f.Pod("gone", corev1.PodRunning, "10.60.0.5")
	leak := f.Reservation(pool.Name, "10.60.0.5", pod, "node-a")
	f.DeletePod(pod)
	orphan := f.Slice(pool.Name, 0, "10.60.0.0/28", "node-gone")
	nad := f.NAD("inline", ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","range":"10.61.0.0/24"}`))

	opts := testOptions()
	opts.LeaderElection = true
	opts.LeaderElectionID = "netpool-controller-rbac-test"
	opts.LeaderElectionNamespace = deployNamespace
	opts.SliceGrace = time.Hour
	m := mustStartManager(t, cfg, opts)

	poll.Eventually(t, 15*time.Second, "the leader Lease is taken", func() error {
		if !elected(m) {
			return errors.New("not elected")
		}
		return nil
	})
	poll.Eventually(t, 10*time.Second, "the leak is released", f.Gone(leak))
	poll.Eventually(t, 10*time.Second, "the deleted node's slice goes back", f.Gone(orphan))
	poll.Eventually(t, 10*time.Second, "the NAD's pool is created", f.Exists(&ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "10.61.0.0-24"}}))
	poll.Eventually(t, 10*time.Second, "the pool's status is written", func() error {
		got := &ipamv1.IPPool{}
		if err := f.C.Get(context.Background(), client.ObjectKeyFromObject(pool), got); err != nil {
			return err
		}
		if got.Status.Capacity != "254" {
			return fmt.Errorf("status %+v", got.Status)
		}
		return nil
	})
	poll.Eventually(t, 10*time.Second, "events.k8s.io Events are recorded", func() error {
		return f.WantEvent(nad.UID, corev1.EventTypeNormal, nadreconciler.EventPoolCreated, "10.61.0.0-24")
	})
	poll.Eventually(t, 10*time.Second, "the leader election Event is recorded", func() error {
		var list corev1.EventList
		if err := f.C.List(context.Background(), &list, client.InNamespace(deployNamespace)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == "LeaderElection" && e.InvolvedObject.Name == opts.LeaderElectionID {
				return nil
			}
		}
		return errors.New("no LeaderElection Event")
	})
	// An EgressRouter with a pool: its address claimed, its children made, its status written.
	router := f.TestRouter("rbac")
	router.Spec.Addresses = []networkv1.EgressRouterAddress{{IP: "10.60.0.99/24", Gateway: "10.60.0.1"}}
	router.Spec.Redirect.RedirectRules = router.Spec.Redirect.RedirectRules[1:]
	router.Spec.Pool = pool.Name
	f.Create(router)
	f.BringUp("rbac")
	poll.Eventually(t, 10*time.Second, "the router's address is claimed", f.Exists(&ipamv1.OverlappingRangeIPReservation{ObjectMeta: metav1.ObjectMeta{Name: "10.60.0.99"}}))
	if err := f.C.Delete(context.Background(), router); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, "the router is finalized", f.Gone(router))
	if logs := m.Logs.String(); strings.Contains(logs, "forbidden") {
		t.Errorf("the controller was refused something:\n%s", logs)
	}

	sa, err := f.Env.NewClient(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	wantForbidden(t, sa)
}

// wantForbidden checks that the controller's identity may not do what it does not need.
func wantForbidden(t *testing.T, sa client.Client) {
	t.Helper()
	ctx := context.Background()
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "rbac"}}
	attempts := map[string]func() error{
		"read secrets": func() error { return sa.List(ctx, &corev1.SecretList{}) },
		"delete pods":  func() error { return sa.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default")) },
		// Updating reservations is granted: the GC removes the users whose pods are gone from
		// persistently owned ones (gcpolicy.Prune), by an update conditional on what it read.
		"patch reservations": func() error {
			return sa.Patch(ctx, &ipamv1.OverlappingRangeIPReservation{ObjectMeta: metav1.ObjectMeta{Name: "10.60.0.9"}},
				client.RawPatch(types.MergePatchType, []byte(`{"spec":{"node":"node-x"}}`)))
		},
		"delete services": func() error { return sa.DeleteAllOf(ctx, &corev1.Service{}, client.InNamespace("default")) },
		"update egress routers": func() error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(networkv1.GroupVersion.WithKind("EgressRouter"))
			u.SetNamespace("default")
			u.SetName("x")
			return sa.Update(ctx, u)
		},
		// Deleting pools is granted: the controller removes derived pools that nothing uses
		// (RBAC cannot narrow it to them; package derivedpool deletes no other).
		"delete every pool at once": func() error { return sa.DeleteAllOf(ctx, &ipamv1.IPPool{}) },
		"update pools":              func() error { return sa.Update(ctx, pool) },
		"delete nodes":              func() error { return sa.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}) },
		"delete events":             func() error { return sa.DeleteAllOf(ctx, &eventsv1.Event{}, client.InNamespace("default")) },
		"write leases elsewhere":    func() error { return sa.DeleteAllOf(ctx, leaseObject(), client.InNamespace("kube-system")) },
	}
	for what, attempt := range attempts {
		if err := attempt(); !apierrors.IsForbidden(err) {
			t.Errorf("the controller's identity may %s: got %v, want Forbidden", what, err)
		}
	}
}

// leaseObject is an empty Lease, as unstructured so the test needs no extra scheme.
func leaseObject() client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"})
	return u
}

// mustNamespace creates a namespace unless it exists.
func mustNamespace(f *ctrltest.Fixture, name string) {
	t := f.T
	t.Helper()
	err := f.C.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// mustReadManifests decodes every object of a multi-document YAML file.
func mustReadManifests(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decoding %s: %v", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		objs = append(objs, u)
	}
	if len(objs) == 0 {
		t.Fatalf("%s holds no object", path)
	}
	return objs
}
