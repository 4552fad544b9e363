package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// TestLeaksAndCheckNeedOnlyTheViewerRole: a user bound to deploy/base's read-only netpool-viewer
// role (a copy under a name of this test's) can run both commands; a user without it is refused
// with the API server's Forbidden.
func TestLeaksAndCheckNeedOnlyTheViewerRole(t *testing.T) {
	e := newLCEnv(t)
	data, err := os.ReadFile(filepath.Join("..", "deploy", "base", "viewer-role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil {
		t.Fatal(err)
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: "ctlops-netpool-viewer"}
	e.create(&role)
	e.create(&rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ctlops-netpool-viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "ctlops-viewer"}},
	})
	p := e.pool("ctlops-rbac", ipamv1.IPPoolSpec{Range: "10.83.0.0/24", NetworkName: "ctlops-rbac"})
	e.reservation(p, "10.83.0.2", "ctlops-rbac/gone", "uid-gone", "ctlops-rbac-node", "")
	e.setStatusCounts(p, "254", 1, "253")
	viewer := e.env.UserKubeconfig(t, "ctlops-viewer", nil)
	stranger := e.env.UserKubeconfig(t, "ctlops-stranger", nil)

	out, errOut, err := runCLI(t, "--kubeconfig", viewer, "leaks", "-n", "ctlops-rbac", "-o", "json")
	if !errors.Is(err, errLeaksFound) || !strings.Contains(out, `"reason": "PodDeleted"`) {
		t.Fatalf("leaks as the viewer: %v\n%s%s", err, out, errOut)
	}
	if out, _, err := runCLI(t, "--kubeconfig", viewer, "check", "--network", "ctlops-rbac"); err != nil {
		t.Fatalf("check as the viewer: %v\n%s", err, out)
	}
	for _, cmd := range []string{"leaks", "check"} {
		if _, _, err := runCLI(t, "--kubeconfig", stranger, cmd); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("%s without the role: %v; want forbidden", cmd, err)
		}
	}
}
