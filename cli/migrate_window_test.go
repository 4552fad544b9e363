package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/cli/migrate"
	"github.com/netpool/netpool/test/harness"
)

// checkFindings runs netpoolctl check -o json and returns its findings of the whereabouts kinds,
// and the command's error. Other kinds (the pools' status counts, which no controller writes
// here) are not this test's.
func checkFindings(t *testing.T, w *whereaboutsEnv, network string) ([]checkFinding, error) {
	t.Helper()
	out, errOut, err := runCLI(t, "check", "--kubeconfig", w.env.Kubeconfig, "--network", network, "-o", "json")
	var r checkReport
	if jerr := json.Unmarshal([]byte(out), &r); jerr != nil {
		t.Fatalf("check -o json: %q (%s): %v", out, errOut, jerr)
	}
	var wb []checkFinding
	for _, f := range r.Findings {
		if f.Kind == migrate.KindHeldTwice || f.Kind == migrate.KindWhereaboutsOnly {
			wb = append(wb, f)
		}
	}
	return wb, err
}

// findingAddrs lists "<kind> <address>" of findings, sorted, the address read from the message.
func findingAddrs(fs []checkFinding) []string {
	var out []string
	for _, f := range fs {
		addr, _, _ := strings.Cut(f.Message, " ")
		if f.Kind == migrate.KindWhereaboutsOnly {
			_, rest, _ := strings.Cut(f.Message, "whereabouts gives ")
			addr, _, _ = strings.Cut(rest, " ")
		}
		out = append(out, f.Kind+" "+addr)
	}
	slices.Sort(out)
	return out
}

// TestMigrateWindowIsFound reproduces the window: whereabouts serves ADDs after the import, the
// NAD is switched by hand, and netpool hands out the same addresses. check names each address
// whereabouts holds that netpool does not (before netpool gives it again) and then each address
// held twice, and exits non-zero; migrate's verify step, which reads the switched NAD, does too.
func TestMigrateWindowIsFound(t *testing.T) {
	w := mustWhereabouts(t)
	ctx := context.Background()
	const ns, network, networkName, subnet = "migrate-late", "migrate-late-net", "miglate", "10.250.13.0/28"
	w.namespace(t, ns)
	config := w.whereaboutsConfig(t, network, networkName, subnet)
	w.nad(t, ns, "l2", config)
	for i, name := range []string{"old-1", "old-2"} {
		if _, err := cniAdd(t, w.plugin, []byte(config), "cid-"+name, w.pod(t, ns, name, "mig-a")); err != nil {
			t.Fatalf("whereabouts ADD %d: %v", i, err)
		}
	}
	if _, errOut, err := runCLI(t, "migrate", "whereabouts", "--kubeconfig", w.env.Kubeconfig, "-n", ns, "--apply"); err != nil {
		t.Fatalf("import: %v (%s)", err, errOut)
	}
	// The window: whereabouts serves two more ADDs after the import.
	var late []string
	for _, name := range []string{"l2-late", "l2-later"} {
		a, err := cniAdd(t, w.plugin, []byte(config), "cid-"+name, w.pod(t, ns, name, "mig-a"))
		if err != nil {
			t.Fatalf("whereabouts ADD %s: %v", name, err)
		}
		late = append(late, a.String())
	}
	if fs, err := checkFindings(t, w, networkName); err == nil ||
		!slices.Equal(findingAddrs(fs), []string{"WhereaboutsOnly " + late[0], "WhereaboutsOnly " + late[1]}) {
		t.Fatalf("check after the window: %v, findings %+v; want both late addresses whereabouts-only and a non-zero exit", err, fs)
	}

	// The switch by hand, and netpool's ADDs until the pool is exhausted: it hands the late
	// addresses out again.
	nad := &nadv1.NetworkAttachmentDefinition{}
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "l2"}, nad); err != nil {
		t.Fatal(err)
	}
	nad.Spec.Config = strings.Replace(nad.Spec.Config, `"type":"whereabouts"`, `"type":"netpool"`, 1)
	if err := w.c.Update(ctx, nad); err != nil {
		t.Fatal(err)
	}
	nodeA := onNode(t, nad.Spec.Config, w.startAgent(t, "mig-a"))
	bin := harness.MustBinDir(t) + "/netpool"
	holder := map[string]string{}
	for i := 0; ; i++ {
		p := w.pod(t, ns, fmt.Sprintf("l2-new-%d", i), "mig-a")
		a, err := cniAdd(t, bin, nodeA, "cid-"+p.Name, p)
		if err != nil {
			if harness.CNIErrorCode(err) != 100 || i != 12 {
				t.Fatalf("netpool ADD %d: %v; want 12 ADDs, then the pool exhausted", i, err)
			}
			break
		}
		holder[a.String()] = p.Name
	}
	if holder[late[0]] == "" || holder[late[1]] == "" {
		t.Fatalf("netpool gave %v, not the late addresses %v", holder, late)
	}

	fs, err := checkFindings(t, w, networkName)
	if err == nil || !strings.Contains(err.Error(), "inconsistencies in cluster") ||
		!slices.Equal(findingAddrs(fs), []string{"HeldTwice " + late[0], "HeldTwice " + late[1]}) {
		t.Fatalf("check after the duplicates: %v, findings %+v; want both late addresses held twice and a non-zero exit", err, fs)
	}
	for _, f := range fs {
		addr, _, _ := strings.Cut(f.Message, " ")
		if !strings.Contains(f.Message, ns+"/"+holder[addr]) || !strings.Contains(f.Message, "whereabouts gives it to "+ns+"/l2-late") {
			t.Errorf("finding %+v does not name both holders (netpool's %s)", f, holder[addr])
		}
	}
	// Without whereabouts' records check sees nothing wrong: the duplicates are across the stores.
	if fs, _ := func() ([]checkFinding, error) {
		out, _, err := runCLI(t, "check", "--kubeconfig", w.env.Kubeconfig, "--network", networkName, "--whereabouts=false", "-o", "json")
		var r checkReport
		_ = json.Unmarshal([]byte(out), &r)
		return r.Findings, err
	}(); slices.ContainsFunc(fs, func(f checkFinding) bool { return f.Kind == migrate.KindHeldTwice }) {
		t.Errorf("--whereabouts=false still compared whereabouts: %+v", fs)
	}

	// migrate reads the switched NAD, verifies, reports the conflicts and exits non-zero.
	out, _, err := runCLI(t, "migrate", "whereabouts", "--kubeconfig", w.env.Kubeconfig, "-n", ns, "-o", "json")
	if err == nil {
		t.Fatal("migrate after the duplicates exited 0")
	}
	r := decodeReport(t, out)
	var twice []string
	for _, d := range r.Discrepancies {
		if d.Kind == migrate.KindHeldTwice {
			twice = append(twice, d.Address)
		}
	}
	slices.Sort(twice)
	if len(r.NADs) != 1 || !r.NADs[0].Switched || !slices.Equal(twice, sortedStrings(late)) || r.Summary.HeldTwice != 2 || r.Summary.Conflicts != 2 {
		t.Fatalf("migrate report %s: want the switched NAD, 2 conflicts and both late addresses held twice", out)
	}
}

func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// attachment is one pod's address, as a runtime got it through "Multus".
type attachment struct {
	pod, plugin string
	addr        netip.Addr
}

// multusAdd attaches pod as Multus does: it reads the NAD from the API server at that moment and
// runs the IPAM plugin its config names: whereabouts (with sleep_for_race, whereabouts' own knob
// to hold an ADD between reading its pool and writing it, when slow is set), or netpool through
// the node's agent. A failed ADD is retried, as the kubelet retries a pod's sandbox, reading the
// NAD again.
func (w *whereaboutsEnv) multusAdd(ctx context.Context, ns, nadName string, pod *corev1.Pod, socket, netpoolBin string, slow int) (attachment, []error) {
	var errs []error
	for attempt := range 40 {
		nad := &nadv1.NetworkAttachmentDefinition{}
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: nadName}, nad); err != nil {
			errs = append(errs, err)
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(nad.Spec.Config), &doc); err != nil {
			return attachment{}, append(errs, err)
		}
		section := doc["ipam"].(map[string]any)
		plugin := w.plugin
		switch section["type"] {
		case "netpool":
			plugin = netpoolBin
			section["kubernetes"].(map[string]any)["agent_socket"] = socket
		case "whereabouts":
			if slow > 0 && attempt == 0 {
				section["sleep_for_race"] = slow
			}
		}
		config, err := json.Marshal(doc)
		if err != nil {
			return attachment{}, append(errs, err)
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		out, err := harness.Exec(actx, plugin, harness.Invocation{Command: "ADD", ContainerID: "cid-" + pod.Name, IfName: "net1",
			Args: podArgs(pod), Config: config})
		cancel()
		if err == nil {
			addrs, aerr := out.Addrs()
			if aerr == nil && len(addrs) == 1 {
				return attachment{pod: pod.Name, plugin: section["type"].(string), addr: addrs[0]}, errs
			}
			err = fmt.Errorf("result %s: %v", out.Stdout, aerr)
		}
		errs = append(errs, fmt.Errorf("%s ADD: %w", section["type"], err))
		time.Sleep(200 * time.Millisecond)
	}
	return attachment{}, errs
}

// TestMigrateSwitchNADsLeavesNoDuplicate: whereabouts keeps allocating (two workers attaching
// pods through the NAD as Multus would, one whereabouts ADD held between its read and its write
// with sleep_for_race) while migrate whereabouts --switch-nads runs. The held ADD fails (the lock
// came between its read and its write), its retry gets a netpool address, every attachment has an
// address of its own, verify and check find nothing, and whereabouts allocates nothing more.
func TestMigrateSwitchNADsLeavesNoDuplicate(t *testing.T) {
	w := mustWhereabouts(t)
	ctx := context.Background()
	const ns, network, networkName, subnet = "migrate-switch", "migrate-switch-net", "migsw", "10.250.14.0/26"
	w.namespace(t, ns)
	config := w.whereaboutsConfig(t, network, networkName, subnet)
	w.nad(t, ns, "sw", config)
	socket := w.startAgent(t, "mig-a")
	bin := harness.MustBinDir(t) + "/netpool"

	var mu sync.Mutex
	var got []attachment
	var failures []string
	record := func(a attachment, errs []error, name string) {
		mu.Lock()
		defer mu.Unlock()
		if a.pod == "" {
			failures = append(failures, fmt.Sprintf("%s: %v", name, errs))
			return
		}
		got = append(got, a)
	}
	for _, name := range []string{"before-1", "before-2", "before-3"} {
		a, errs := w.multusAdd(ctx, ns, "sw", w.pod(t, ns, name, "mig-a"), socket, bin, 0)
		record(a, errs, name)
	}
	if _, errOut, err := runCLI(t, "migrate", "whereabouts", "--kubeconfig", w.env.Kubeconfig, "-n", ns, "--apply"); err != nil {
		t.Fatalf("first import: %v (%s)", err, errOut)
	}

	var wg sync.WaitGroup
	started := make(chan struct{}, 16)
	for worker := range 2 {
		var pods []*corev1.Pod // created here: a goroutine other than the test's may not stop it
		for i := range 8 {
			pods = append(pods, w.pod(t, ns, fmt.Sprintf("w%d-%d", worker, i), "mig-a"))
		}
		wg.Go(func() {
			for _, p := range pods {
				started <- struct{}{}
				a, errs := w.multusAdd(ctx, ns, "sw", p, socket, bin, 0)
				record(a, errs, p.Name)
			}
		})
	}
	// The held ADD: whereabouts reads its pool, then sleeps 5 s before its patch.
	held := w.pod(t, ns, "held", "mig-a")
	heldDone := make(chan []error, 1)
	var heldAt attachment
	wg.Go(func() {
		a, errs := w.multusAdd(ctx, ns, "sw", held, socket, bin, 5)
		heldAt = a
		record(a, errs, "held")
		heldDone <- errs
	})
	<-started
	<-started
	time.Sleep(time.Second) // the held ADD has read its pool
	out, errOut, err := runCLI(t, "migrate", "whereabouts", "--kubeconfig", w.env.Kubeconfig, "-n", ns, "--switch-nads", "-o", "json")
	if err != nil {
		t.Fatalf("--switch-nads: %v (%s)\n%s", err, errOut, out)
	}
	r := decodeReport(t, out)
	if len(r.NADs) != 1 || !r.NADs[0].SwitchedNow || len(r.Pools) != 1 || !r.Pools[0].Locked || !r.Applied ||
		r.Summary.HeldTwice != 0 || r.Summary.WhereaboutsOnly != 0 {
		t.Fatalf("--switch-nads report %s: want the NAD switched, its whereabouts pool locked and nothing to verify", out)
	}
	wg.Wait()
	heldErrs := <-heldDone
	if len(failures) > 0 {
		t.Fatalf("attachments that never got an address: %v", failures)
	}

	// The held ADD's first attempt, whereabouts', failed: the lock came between its read and its
	// write. Its retry read the switched NAD.
	if len(heldErrs) == 0 || !strings.HasPrefix(heldErrs[0].Error(), "whereabouts ADD") || heldAt.plugin != "netpool" {
		t.Errorf("the held whereabouts ADD: errors %v, then %+v; want whereabouts to fail and netpool to serve the retry", heldErrs, heldAt)
	}
	byAddr := map[netip.Addr][]string{}
	plugins := map[string]int{}
	for _, a := range got {
		byAddr[a.addr] = append(byAddr[a.addr], a.pod+" ("+a.plugin+")")
		plugins[a.plugin]++
	}
	for a, pods := range byAddr {
		if len(pods) > 1 {
			t.Errorf("%s was given to %v", a, pods)
		}
	}
	if len(got) != 20 || plugins["whereabouts"] < 3 || plugins["netpool"] < 1 {
		t.Errorf("%d attachments, by plugin %v: want 20, from both plugins", len(got), plugins)
	}
	t.Logf("attachments by plugin: %v", plugins)

	// Verify and check find nothing; a second --switch-nads changes nothing.
	if fs, _ := checkFindings(t, w, networkName); len(fs) != 0 {
		t.Errorf("check after the switch: %+v", fs)
	}
	out, errOut, err = runCLI(t, "migrate", "whereabouts", "--kubeconfig", w.env.Kubeconfig, "-n", ns, "-o", "json")
	if r := decodeReport(t, out); err != nil || len(r.Discrepancies) != 0 || len(r.NADs) != 1 || !r.NADs[0].Switched || r.Summary.Create != 0 {
		t.Errorf("migrate after the switch: %v (%s) %s", err, errOut, out)
	}

	// The lock stays: whereabouts, called with the NAD's old config, allocates nothing more.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "whereabouts.cni.cncf.io", Version: "v1alpha1", Kind: "IPPool"})
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: networkName + "-10.250.14.0-26"}, u); err != nil {
		t.Fatal(err)
	}
	if rng, _, _ := unstructured.NestedString(u.Object, "spec", "range"); !strings.HasPrefix(rng, "netpool-migrated:") {
		t.Errorf("whereabouts' pool has range %q, want it locked", rng)
	}
	late := w.pod(t, ns, "late", "mig-a")
	if a, err := cniAdd(t, w.plugin, []byte(config), "cid-late", late); err == nil {
		t.Errorf("whereabouts allocated %s after the switch", a)
	}
	// A DEL through whereabouts (Multus' cached config of an old attachment) still succeeds.
	cniDel(t, w.plugin, []byte(config), "cid-before-1", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "before-1"}})
}

// wbPoolRange reads spec.range of whereabouts IPPool kube-system/name ("" when it does not exist).
func wbPoolRange(t *testing.T, w *whereaboutsEnv, name string) string {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "whereabouts.cni.cncf.io", Version: "v1alpha1", Kind: "IPPool"})
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: "kube-system", Name: name}, u); err != nil {
		return ""
	}
	rng, _, _ := unstructured.NestedString(u.Object, "spec", "range")
	return rng
}

// TestMigrateSwitchNADsRefusals: a switch limited to one namespace whose whereabouts pool another
// namespace's NAD uses is refused before anything is locked; a conflict stops it with nothing
// locked or switched; a range whereabouts has no pool for yet gets a locked one.
func TestMigrateSwitchNADsRefusals(t *testing.T) {
	w := mustWhereabouts(t)
	ctx := context.Background()
	const networkName, subnet, wbPool = "migref", "10.250.15.0/28", "migref-10.250.15.0-28"
	w.namespace(t, "migrate-ref-a")
	w.namespace(t, "migrate-ref-b")
	config := w.whereaboutsConfig(t, "migrate-ref-net", networkName, subnet)
	w.nad(t, "migrate-ref-a", "shared", config)
	w.nad(t, "migrate-ref-b", "shared", config)
	if _, err := cniAdd(t, w.plugin, []byte(config), "cid-ref-1", w.pod(t, "migrate-ref-a", "p1", "mig-a")); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCLI(t, "migrate", "whereabouts", "--kubeconfig", w.env.Kubeconfig, "-n", "migrate-ref-a", "--switch-nads")
	if err == nil || !strings.Contains(err.Error(), "NADs of other namespaces use the same whereabouts pools: migrate-ref-b/shared (whereabouts IPPool "+wbPool+")") {
		t.Fatalf("-n with a shared pool: %v, want it refused naming the other NAD", err)
	}
	if rng := wbPoolRange(t, w, wbPool); rng != subnet {
		t.Errorf("a refused switch left whereabouts' pool with range %q", rng)
	}

	// Once the other namespace's NAD is gone, the switch of one namespace goes through. (Tests of
	// this package share the API server, so a switch of every namespace would meet their NADs.)
	if err := w.c.Delete(ctx, &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "migrate-ref-b", Name: "shared"}}); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "migrate", "whereabouts", "--kubeconfig", w.env.Kubeconfig, "-n", "migrate-ref-a", "--switch-nads", "-o", "json")
	if err != nil {
		t.Fatalf("switch of the namespace: %v\n%s", err, out)
	}
	if r := decodeReport(t, out); len(r.NADs) != 1 || !r.NADs[0].SwitchedNow {
		t.Fatalf("switch of the namespace: %s", out)
	}
	if rng := wbPoolRange(t, w, wbPool); rng != "netpool-migrated:"+subnet {
		t.Errorf("whereabouts' pool has range %q after the switch", rng)
	}

	// A NAD whose range whereabouts never allocated from: the switch creates its pool locked.
	const fresh = "migfresh-10.250.16.0-28"
	w.namespace(t, "migrate-ref-c")
	freshConfig := w.whereaboutsConfig(t, "migrate-fresh-net", "migfresh", "10.250.16.0/28")
	w.nad(t, "migrate-ref-c", "fresh", freshConfig)
	if _, errOut, err := runCLI(t, "migrate", "whereabouts", "--kubeconfig", w.env.Kubeconfig, "-n", "migrate-ref-c", "--switch-nads"); err != nil {
		t.Fatalf("switch of a NAD without a whereabouts pool: %v (%s)", err, errOut)
	}
	if rng := wbPoolRange(t, w, fresh); rng != "netpool-migrated:10.250.16.0/28" {
		t.Errorf("the switch left whereabouts' pool %s with range %q, want it created locked", fresh, rng)
	}
	if a, err := cniAdd(t, w.plugin, []byte(freshConfig), "cid-fresh", w.pod(t, "migrate-ref-c", "f1", "mig-a")); err == nil {
		t.Errorf("whereabouts allocated %s from the locked pool it never had", a)
	}
	nad := &nadv1.NetworkAttachmentDefinition{}
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: "migrate-ref-c", Name: "fresh"}, nad); err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(freshConfig, `"type":"whereabouts"`, `"type":"netpool"`, 1); nad.Spec.Config != want {
		t.Errorf("the switched config is\n%s\nwant only the type changed:\n%s", nad.Spec.Config, want)
	}
}
