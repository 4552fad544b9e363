package cli

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/cli/migrate"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/reservation"
	"github.com/netpool/netpool/test/harness"
)

// TestMigrateWhereabouts runs the real whereabouts plugin against the API server, migrates what it
// allocated, switches the NAD to netpool and shows through netpool's agent and plugin that no
// address whereabouts gave is handed out again, and that DEL of a migrated attachment releases it.
func TestMigrateWhereabouts(t *testing.T) {
	w := mustWhereabouts(t)
	ctx := context.Background()
	const ns, network, networkName, subnet = "migrate-wb", "migrate-wb-net", "migwb", "10.250.7.0/28"
	const pool = "migwb-10.250.7.0-28"
	w.namespace(t, ns)
	config := w.whereaboutsConfig(t, network, networkName, subnet)
	w.nad(t, ns, "wb", config)

	// whereabouts hands out .1 to .4 in order; the pod of .4 is then deleted without a DEL, the
	// leak whereabouts' users clean by hand.
	pods := []*corev1.Pod{w.pod(t, ns, "a1", "mig-a"), w.pod(t, ns, "b1", "mig-b"), w.pod(t, ns, "a2", "mig-a"), w.pod(t, ns, "gone", "mig-b")}
	ids := []string{"cid-a1", "cid-b1", "cid-a2", "cid-gone"}
	var given []netip.Addr
	for i, p := range pods {
		a, err := cniAdd(t, w.plugin, []byte(config), ids[i], p)
		if err != nil {
			t.Fatalf("whereabouts ADD %s: %v", ids[i], err)
		}
		given = append(given, a)
	}
	if want := []string{"10.250.7.1", "10.250.7.2", "10.250.7.3", "10.250.7.4"}; !slices.Equal(addrStrings(given), want) {
		t.Fatalf("whereabouts gave %v, want %v", given, want)
	}
	// Without a kubelet, a bound pod is gone at once only when deleted with no grace period.
	if err := w.c.Delete(ctx, pods[3], client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	// A whereabouts reservation that no allocation explains: what a crash between whereabouts' two
	// writes leaves.
	w.mustCreate(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "whereabouts.cni.cncf.io/v1alpha1", "kind": "OverlappingRangeIPReservation",
		"metadata": map[string]any{"namespace": "kube-system", "name": networkName + "-10.250.7.9"},
		"spec":     map[string]any{"podref": ns + "/ghost", "ifname": "net1"},
	}})
	// The test's agents serve the flat file's directory (startAgent), as --extra-config-dir does.
	args := []string{"migrate", "whereabouts", "--kubeconfig", w.env.Kubeconfig, "-n", ns, "--agent-extra-config-dir", w.flatDir}
	// Without saying so, the dry run flags the flat file: an agent with the default directories
	// would fail every ADD of the NAD with code 7.
	if out, _, err := runCLI(t, "migrate", "whereabouts", "--kubeconfig", w.env.Kubeconfig, "-n", ns, "-o", "wide"); err != nil ||
		!strings.Contains(out, "configuration_path "+w.flatDir+"/whereabouts.conf is outside the directories the netpool agent serves") ||
		!strings.Contains(out, "--extra-config-dir="+w.flatDir+" ") {
		t.Errorf("the dry run does not flag the flat file outside the agents' directories (%v):\n%s", err, out)
	}
	// netpool's agents run before the migration, as they do once netpool is installed: they learn
	// of the imported reservations from their watch, not from their first list.
	socketA, socketB := w.startAgent(t, "mig-a"), w.startAgent(t, "mig-b")

	t.Run("a dry run reports and changes nothing", func(t *testing.T) {
		for _, f := range []struct{ flag, golden string }{{"table", "migrate-dryrun.txt"}, {"wide", "migrate-dryrun-wide.txt"}, {"json", "migrate-dryrun.json"}, {"yaml", "migrate-dryrun.yaml"}} {
			out, errOut, err := runCLI(t, append(args, "-o", f.flag)...)
			if err != nil {
				t.Fatalf("-o %s: %v (%s)", f.flag, err, errOut)
			}
			assertGolden(t, f.golden, fixUIDs(out, pods...))
			if want := "dry run: 4 to create, 0 unchanged, 0 conflicts, 2 skipped, 0 invalid; run again with --apply to write\n"; errOut != want {
				t.Fatalf("stderr %q, want %q", errOut, want)
			}
		}
		notFound(t, w.c.Get(ctx, client.ObjectKey{Name: pool}, &ipamv1.IPPool{}), "IPPool after a dry run")
		if rs := reservationsOf(t, w, pool); len(rs) != 0 {
			t.Fatalf("a dry run created %d reservations", len(rs))
		}
	})

	t.Run("--apply creates the pool and one reservation per live attachment", func(t *testing.T) {
		out, errOut, err := runCLI(t, append(args, "--apply")...)
		if err != nil {
			t.Fatalf("%v (%s)", err, errOut)
		}
		assertGolden(t, "migrate-apply.txt", fixUIDs(out, pods...))
		rs := reservationsOf(t, w, pool)
		if len(rs) != 3 {
			t.Fatalf("%d reservations, want 3", len(rs))
		}
		for i, r := range rs {
			p := pods[i]
			want := ipamv1.OverlappingRangeIPReservationSpec{Address: given[i].String(), Pool: pool, ContainerID: ids[i], IfName: "net1",
				PodRef: ns + "/" + p.Name, PodUID: string(p.UID), Node: p.Spec.NodeName, NetworkName: networkName}
			if !equality.Semantic.DeepEqual(r.Spec, want) || r.Name != networkName+"."+given[i].String() || r.Labels[ipamv1.NodeLabel] != p.Spec.NodeName ||
				r.Labels[ipamv1.PoolLabel] != pool || r.Annotations[ipamv1.NetworkAnnotation] != network {
				t.Errorf("reservation %s: %+v %v %v; want spec %+v, node label %s, network %s", r.Name, r.Spec, r.Labels, r.Annotations, want, p.Spec.NodeName, network)
			}
		}
	})

	t.Run("a second run changes nothing", func(t *testing.T) {
		before := reservationsOf(t, w, pool)
		out, errOut, err := runCLI(t, append(args, "--apply", "-o", "json")...)
		if err != nil {
			t.Fatalf("%v (%s)", err, errOut)
		}
		r := decodeReport(t, out)
		if want := (migrate.Summary{Unchanged: 4, Skipped: 2}); r.Summary != want || !r.Applied {
			t.Fatalf("summary %+v applied %t, want %+v applied", r.Summary, r.Applied, want)
		}
		if after := reservationsOf(t, w, pool); !sameVersions(before, after) {
			t.Fatal("a second run changed reservations")
		}
	})

	a3 := w.pod(t, ns, "a3", "mig-a")
	a3Addr, err := cniAdd(t, w.plugin, []byte(config), "cid-a3", a3)
	if err != nil || a3Addr.String() != "10.250.7.5" {
		t.Fatalf("whereabouts ADD a3: %v %v, want 10.250.7.5", a3Addr, err)
	}

	t.Run("an address netpool gives to someone else is a conflict, never overwritten", func(t *testing.T) {
		planted := reservation.New("mig-b", pool, networkName, networkName, &allocator.Allocation{Addr: a3Addr,
			Owner: allocator.Owner{ContainerID: "planted", IfName: "net1"}, Network: "someone-else"})
		w.mustCreate(t, planted)
		before := reservationsOf(t, w, pool)
		out, errOut, err := runCLI(t, append(args, "--apply", "-o", "json")...)
		if err == nil || !strings.Contains(err.Error(), "1 conflicts and 0 invalid entries: nothing was written") {
			t.Fatalf("error %v, want the conflict", err)
		}
		r := decodeReport(t, out)
		var conflict *migrate.Allocation
		for i := range r.Allocations {
			if r.Allocations[i].Action == migrate.ActionConflict {
				conflict = &r.Allocations[i]
			}
		}
		if conflict == nil || conflict.Address != a3Addr.String() || !strings.Contains(conflict.Reason, "planted/net1 on node mig-b") || r.Applied {
			t.Fatalf("report %s, want a conflict on %s naming the planted holder (stderr %s)", out, a3Addr, errOut)
		}
		if after := reservationsOf(t, w, pool); !sameVersions(before, after) {
			t.Fatal("a blocked run changed reservations")
		}
		if err := w.c.Delete(ctx, planted); err != nil {
			t.Fatal(err)
		}
		if _, errOut, err := runCLI(t, append(args, "--apply")...); err != nil {
			t.Fatalf("after removing the planted reservation: %v (%s)", err, errOut)
		}
	})
	pods = append(pods, a3)
	ids = append(ids, "cid-a3")

	// The switch: the NAD's IPAM type becomes netpool, nothing else.
	nad := &nadv1.NetworkAttachmentDefinition{}
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wb"}, nad); err != nil {
		t.Fatal(err)
	}
	nad.Spec.Config = strings.Replace(nad.Spec.Config, `"type":"whereabouts"`, `"type":"netpool"`, 1)
	if err := w.c.Update(ctx, nad); err != nil {
		t.Fatal(err)
	}
	bin := harness.MustBinDir(t) + "/netpool"
	nodeA, nodeB := onNode(t, nad.Spec.Config, socketA), onNode(t, nad.Spec.Config, socketB)

	t.Run("netpool's ADDs never hand out an address whereabouts gave", func(t *testing.T) {
		// A repeated ADD of a migrated attachment returns its address: the agent found it.
		if got, err := cniAdd(t, bin, nodeA, "cid-a1", pods[0]); err != nil || got != given[0] {
			t.Fatalf("netpool ADD of migrated cid-a1 = %v, %v; want %s", got, err, given[0])
		}
		held := map[netip.Addr]bool{given[0]: true, given[1]: true, given[2]: true, a3Addr: true}
		var got []netip.Addr
		for i := 0; ; i++ {
			p := w.pod(t, ns, "new-"+string(rune('a'+i)), "mig-a")
			a, err := cniAdd(t, bin, nodeA, "cid-new-"+p.Name, p)
			if err != nil {
				if harness.CNIErrorCode(err) != 100 || i != 10 {
					t.Fatalf("ADD %d: %v; want 10 ADDs and then the pool exhausted (code 100)", i, err)
				}
				break
			}
			if held[a] {
				t.Fatalf("netpool handed out %s, which whereabouts gave and the migration imported", a)
			}
			got = append(got, a)
		}
		// The 14 addresses of the /28 less the 4 migrated: the leaked .4 is free again.
		if want := []string{"10.250.7.4", "10.250.7.6", "10.250.7.7", "10.250.7.8", "10.250.7.9", "10.250.7.10", "10.250.7.11", "10.250.7.12", "10.250.7.13", "10.250.7.14"}; !slices.Equal(addrStrings(sorted(got)), want) {
			t.Fatalf("netpool gave %v, want %v", got, want)
		}
	})

	t.Run("DEL of a migrated attachment releases it on its own node", func(t *testing.T) {
		cniDel(t, bin, nodeA, "cid-a1", pods[0])
		cniDel(t, bin, nodeB, "cid-b1", pods[1])
		for _, a := range given[:2] {
			notFound(t, w.c.Get(ctx, client.ObjectKey{Name: ipamv1.ReservationName(networkName, a)}, &ipamv1.OverlappingRangeIPReservation{}), "reservation of "+a.String()+" after DEL")
		}
		p := w.pod(t, ns, "after-del", "mig-a")
		a, err := cniAdd(t, bin, nodeA, "cid-after-del", p)
		if err != nil || (a != given[0] && a != given[1]) {
			t.Fatalf("ADD after the DELs = %v, %v; want %s or %s", a, err, given[0], given[1])
		}
	})
}

// TestMigrateWhereaboutsBadInput: a whereabouts pool with malformed allocations and a NAD whose
// config netpool cannot read are reported, the run exits non-zero, and --apply writes nothing.
func TestMigrateWhereaboutsBadInput(t *testing.T) {
	w := mustWhereabouts(t)
	ctx := context.Background()
	const ns, networkName, pool = "migrate-wb-bad", "migbad", "migbad-10.250.8.0-28"
	w.namespace(t, ns)
	p := w.pod(t, ns, "ok", "mig-c")
	w.nad(t, ns, "good", w.whereaboutsConfig(t, "migrate-bad-net", networkName, "10.250.8.0/28"))
	w.nad(t, ns, "typo", `{"cniVersion":"0.3.1","name":"typo","type":"macvlan","ipam":{"type":"whereabouts","rnage":"10.250.9.0/24"}}`)
	w.nad(t, ns, "sliced", `{"cniVersion":"0.3.1","name":"sliced","type":"macvlan","ipam":{"type":"whereabouts","range":"10.250.10.0/24","node_slice_size":"/28"}}`)
	wb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "whereabouts.cni.cncf.io/v1alpha1", "kind": "IPPool",
		"metadata": map[string]any{"namespace": "kube-system", "name": pool},
		"spec": map[string]any{"range": "10.250.8.0/28", "allocations": map[string]any{
			"1":  map[string]any{"id": "cid-ok", "podref": ns + "/ok", "ifname": "net1"},
			"x7": map[string]any{"id": "cid-x", "podref": ns + "/ok", "ifname": "net2"},
			"99": map[string]any{"id": "cid-far", "podref": ns + "/ok", "ifname": "net3"},
			"3":  map[string]any{"id": "cid-old", "podref": ns + "/ok"}, // no ifname: an old whereabouts wrote none
		}},
	}}
	w.mustCreate(t, wb)
	args := []string{"migrate", "whereabouts", "--kubeconfig", w.env.Kubeconfig, "-n", ns, "--apply", "--agent-extra-config-dir", w.flatDir}
	for _, f := range []struct{ flag, golden string }{{"table", "migrate-invalid.txt"}, {"json", "migrate-invalid.json"}} {
		out, _, err := runCLI(t, append(args, "-o", f.flag)...)
		if err == nil || !strings.Contains(err.Error(), "0 conflicts and 5 invalid entries: nothing was written") {
			t.Fatalf("-o %s: error %v, want 5 invalid entries", f.flag, err)
		}
		assertGolden(t, f.golden, fixUIDs(out, p))
	}
	notFound(t, w.c.Get(ctx, client.ObjectKey{Name: pool}, &ipamv1.IPPool{}), "IPPool after a refused run")
	if rs := reservationsOf(t, w, pool); len(rs) != 0 {
		t.Fatalf("a refused run created %d reservations", len(rs))
	}

	// A user who may read everything but create nothing: even the dry run stops, saying why.
	reader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "migrate-wb-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "migrate-wb-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "migrate-wb-reader"}}}
	w.mustCreate(t, reader, binding)
	readOnly := w.env.UserKubeconfig(t, "migrate-wb-reader", nil)
	w.nad(t, "migrate-wb-bad", "fine", w.whereaboutsConfig(t, "migrate-fine-net", "migfine", "10.250.11.0/28"))
	if _, _, err := runCLI(t, "migrate", "whereabouts", "--kubeconfig", readOnly, "-n", ns); err == nil ||
		!strings.Contains(err.Error(), "in a server-side dry run") || !strings.Contains(err.Error(), "the dry run needs create") {
		t.Errorf("a read-only user's dry run: %v, want the create verb named", err)
	}

	unreachable := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "whereabouts", "--db", "/tmp/x.db"}, "--db: whereabouts keeps its allocations in a cluster"},
		{[]string{"migrate", "whereabouts", "--kubeconfig", "/nonexistent/kubeconfig"}, "failed to load the cluster's client config"},
		{[]string{"migrate", "whereabouts", "--kubeconfig", w.env.Kubeconfig, "-o", "xml"}, `unknown output format "xml"`},
		{[]string{"migrate", "whereabouts", "extra"}, `unknown command "extra"`},
		{[]string{"migrate", "whereabouts", "--kubeconfig", unreachable, "--request-timeout", "2s"}, "failed to list NetworkAttachmentDefinitions"},
	} {
		if _, _, err := runCLI(t, bad.args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want an error containing %q", bad.args, err, bad.want)
		}
	}
}

func reservationsOf(t *testing.T, w *whereaboutsEnv, pool string) []ipamv1.OverlappingRangeIPReservation {
	t.Helper()
	l := &ipamv1.OverlappingRangeIPReservationList{}
	if err := w.c.List(context.Background(), l, client.MatchingLabels{ipamv1.PoolLabel: pool}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(l.Items, func(a, b ipamv1.OverlappingRangeIPReservation) int {
		return netip.MustParseAddr(a.Spec.Address).Compare(netip.MustParseAddr(b.Spec.Address))
	})
	return l.Items
}

func sameVersions(a, b []ipamv1.OverlappingRangeIPReservation) bool {
	return slices.EqualFunc(a, b, func(x, y ipamv1.OverlappingRangeIPReservation) bool {
		return x.Name == y.Name && x.ResourceVersion == y.ResourceVersion
	})
}

func decodeReport(t *testing.T, out string) *migrate.Report {
	t.Helper()
	r := &migrate.Report{}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	return r
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

func sorted(as []netip.Addr) []netip.Addr {
	out := slices.Clone(as)
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// TestMigrateWhereaboutsIPv6: whereabouts' offsets and names of an IPv6 range, as the real plugin
// writes them, become the reservations of the addresses it gave.
func TestMigrateWhereaboutsIPv6(t *testing.T) {
	w := mustWhereabouts(t)
	const ns, networkName, subnet = "migrate-wb-v6", "migv6", "fd00:250:12::/120"
	w.namespace(t, ns)
	config := w.whereaboutsConfig(t, "migrate-v6-net", networkName, subnet)
	w.nad(t, ns, "v6", config)
	var given []netip.Addr
	for _, name := range []string{"p1", "p2"} {
		p := w.pod(t, ns, name, "mig-v6")
		a, err := cniAdd(t, w.plugin, []byte(config), "cid-"+name, p)
		if err != nil {
			t.Fatalf("whereabouts ADD %s: %v", name, err)
		}
		given = append(given, a)
	}
	out, errOut, err := runCLI(t, "migrate", "whereabouts", "--kubeconfig", w.env.Kubeconfig, "-n", ns, "--apply", "-o", "json")
	if err != nil {
		t.Fatalf("%v (%s)", err, errOut)
	}
	r := decodeReport(t, out)
	rs := reservationsOf(t, w, ipamv1.PoolName(networkName, netip.MustParsePrefix(subnet)))
	if len(rs) != 2 || len(r.Allocations) != 2 {
		t.Fatalf("%d reservations, report %s", len(rs), out)
	}
	for i, res := range rs {
		if res.Spec.Address != given[i].String() || res.Name != ipamv1.ReservationName(networkName, given[i]) ||
			r.Allocations[i].Address != given[i].String() || r.Allocations[i].Action != migrate.ActionCreated {
			t.Errorf("reservation %s (%s), report %+v; whereabouts gave %s", res.Name, res.Spec.Address, r.Allocations[i], given[i])
		}
	}
}
