package envtest_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

func TestMain(m *testing.M) { os.Exit(envtest.RunShared(m.Run)) }

func newPool(name, cidr string) *ipamv1.IPPool {
	return &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       ipamv1.IPPoolSpec{Range: cidr},
	}
}

func TestSharedServesTheCRDs(t *testing.T) {
	t.Parallel()
	env := envtest.Shared(t)
	ctx := t.Context()

	var names []string
	for _, crd := range env.CRDs {
		names = append(names, crd.Name)
	}
	slices.Sort(names)
	want := []string{"egressrouters.network.netpool.io", "ippools.ipam.netpool.io", "ippoolslices.ipam.netpool.io", "overlappingrangeipreservations.ipam.netpool.io"}
	if !slices.Equal(names, want) {
		t.Fatalf("installed CRDs %v, want %v", names, want)
	}
	if err := env.Client.Create(ctx, newPool("start", "10.0.0.0/24")); err != nil {
		t.Fatalf("creating an IPPool as admin: %v", err)
	}
	c, err := env.NewClient(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var got ipamv1.IPPool
	if err := c.Get(ctx, client.ObjectKey{Name: "start"}, &got); err != nil {
		t.Fatalf("reading the IPPool through the admin kubeconfig: %v", err)
	}
	if got.Spec.Range != "10.0.0.0/24" {
		t.Fatalf("read range %q, want 10.0.0.0/24", got.Spec.Range)
	}
	if again := envtest.Shared(t); again != env {
		t.Fatal("a second Shared started another Env")
	}
	t.Logf("Start took %s", env.StartDuration)
}

func TestControlPlaneRestartKeepsDataAndURL(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	ctx := t.Context()

	res := &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{Name: "10.1.0.5"},
		Spec: ipamv1.OverlappingRangeIPReservationSpec{
			Address: "10.1.0.5", Pool: "pool", ContainerID: "c1", IfName: "net1", Node: "node-a",
		},
	}
	if err := env.Client.Create(ctx, res); err != nil {
		t.Fatalf("creating a reservation: %v", err)
	}
	// A client made before the restart, from the kubeconfig file, must work after it unchanged.
	c, err := env.NewClient(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	host := env.Config.Host

	if err := env.StopControlPlane(); err != nil {
		t.Fatalf("stopping the control plane: %v", err)
	}
	if err := env.StopControlPlane(); err != nil {
		t.Fatalf("stopping a stopped control plane: %v", err)
	}
	shortCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = c.Get(shortCtx, client.ObjectKeyFromObject(res), &ipamv1.OverlappingRangeIPReservation{})
	cancel()
	if !isConnRefused(err) {
		t.Fatalf("reading while the control plane is stopped: got %v, want connection refused", err)
	}

	began := time.Now()
	if err := env.StartControlPlane(); err != nil {
		t.Fatalf("restarting the control plane: %v", err)
	}
	t.Logf("restart took %s", time.Since(began))
	if err := env.StartControlPlane(); err != nil {
		t.Fatalf("starting a running control plane: %v", err)
	}
	if env.Config.Host != host {
		t.Fatalf("apiserver moved from %s to %s", host, env.Config.Host)
	}
	var got ipamv1.OverlappingRangeIPReservation
	if err := c.Get(ctx, client.ObjectKeyFromObject(res), &got); err != nil {
		t.Fatalf("reading the reservation after the restart: %v", err)
	}
	if !equality.Semantic.DeepEqual(got.Spec, res.Spec) || got.UID != res.UID {
		t.Fatalf("after the restart read %+v (uid %s), want %+v (uid %s)", got.Spec, got.UID, res.Spec, res.UID)
	}
	// The claim still holds: the same name cannot be created twice.
	dup := res.DeepCopy()
	dup.ResourceVersion = ""
	if err := c.Create(ctx, dup); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the reservation again after the restart: got %v, want AlreadyExists", err)
	}
}

func TestStopEndsTheControlPlane(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	c, err := env.NewClient(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := env.Stop(); err != nil {
		t.Fatalf("stopping: %v", err)
	}
	t.Logf("Stop took %s", time.Since(began))
	if err := env.Stop(); err != nil {
		t.Fatalf("stopping twice: %v", err)
	}
	if err := env.StopControlPlane(); err == nil {
		t.Fatal("StopControlPlane after Stop succeeded, want an error")
	}
	if err := env.StartControlPlane(); err == nil {
		t.Fatal("StartControlPlane after Stop succeeded, want an error")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := c.List(ctx, &ipamv1.IPPoolList{}); !isConnRefused(err) {
		t.Fatalf("listing after Stop: got %v, want connection refused", err)
	}
}

func TestUserKubeconfigIsSubjectToRBAC(t *testing.T) {
	t.Parallel()
	env := envtest.Shared(t)
	ctx := t.Context()

	alice, err := env.NewClient(env.UserKubeconfig(t, "alice", []string{"netpool-readers"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.List(ctx, &ipamv1.IPPoolList{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing pools as alice before any binding: got %v, want Forbidden", err)
	}
	bind(t, env, "netpool-readers", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "netpool-readers"})
	waitAllowed(t, func() error { return alice.List(ctx, &ipamv1.IPPoolList{}) })
	if err := alice.Create(ctx, newPool("alice", "10.2.0.0/24")); !apierrors.IsForbidden(err) {
		t.Fatalf("creating a pool as a reader: got %v, want Forbidden", err)
	}
}

func TestServiceAccountKubeconfigMatchesServiceAccountSubjects(t *testing.T) {
	t.Parallel()
	env := envtest.Shared(t)
	ctx := t.Context()

	user, groups := envtest.ServiceAccountUser("kube-system", "netpool")
	if user != "system:serviceaccount:kube-system:netpool" || len(groups) != 2 ||
		groups[0] != "system:serviceaccounts" || groups[1] != "system:serviceaccounts:kube-system" {
		t.Fatalf("ServiceAccountUser = %q %q", user, groups)
	}
	sa, err := env.NewClient(env.ServiceAccountKubeconfig(t, "kube-system", "netpool"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sa.List(ctx, &ipamv1.IPPoolList{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing pools as the service account before any binding: got %v, want Forbidden", err)
	}
	bind(t, env, "netpool-sa", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "netpool"})
	waitAllowed(t, func() error { return sa.List(ctx, &ipamv1.IPPoolList{}) })
}

// bind grants subject get/list/watch on IPPools through a ClusterRole and ClusterRoleBinding named name.
func bind(t *testing.T, env *envtest.Env, name string, subject rbacv1.Subject) {
	t.Helper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{ipamv1.GroupName}, Resources: []string{"ippools"}, Verbs: []string{"get", "list", "watch"},
		}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{subject},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, name, err)
		}
	}
}

// waitAllowed polls call until it succeeds: the RBAC authorizer sees new bindings through its cache.
func waitAllowed(t *testing.T, call func() error) {
	t.Helper()
	poll.Eventually(t, 10*time.Second, "allowed after the binding", func() error {
		err := call()
		if err != nil && !apierrors.IsForbidden(err) {
			t.Fatalf("a call that should be allowed after the binding: %v", err)
		}
		return err
	})
}

// isConnRefused reports whether err comes from dialing a port nothing listens on.
func isConnRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}
