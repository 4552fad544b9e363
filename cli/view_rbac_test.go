package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestViewerRole: the read-only role that deploy/ gives netpoolctl users is enough for pools,
// show and whois, and not for release, which fails with the API's refusal and changes nothing.
func TestViewerRole(t *testing.T) {
	f := newClusterFixture(t)
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join("..", "deploy", "base", "viewer-role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil {
		t.Fatal(err)
	}
	role.Name = "ctlview-" + role.Name
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "ctlview-viewer"}},
	}
	for _, obj := range []client.Object{&role, binding} {
		if err := f.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.c.Delete(ctx, obj) }) // cleanup: a leftover grants only reads
	}
	kc := f.env.UserKubeconfig(t, "ctlview-viewer", nil)
	now := viewClock()
	for _, args := range [][]string{{"pools", "--network", ctlNetwork}, {"show", ctlPoolA, "--slices"}, {"whois", "10.78.0.2"}} {
		if out, _, err := runView(t, now, "", append([]string{"--kubeconfig", kc}, args...)...); err != nil || out == "" {
			t.Fatalf("%v as a viewer: %q, %v", args, out, err)
		}
	}
	_, _, err = runView(t, now, "", "--kubeconfig", kc, "release", "10.78.0.5", "--yes")
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("release as a viewer: %v, want the API's refusal", err)
	}
	if !f.held(t, "10.78.0.5") {
		t.Fatal("a refused release released the address")
	}
}
