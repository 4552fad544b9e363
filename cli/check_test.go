package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/boltstore"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/kubeclient/crclient"
	"github.com/netpool/netpool/internal/scheme"
	"github.com/netpool/netpool/ipam"

	bolt "go.etcd.io/bbolt"
)

func (e *lcEnv) slice(name, pool, cidr, node string) {
	e.create(&ipamv1.IPPoolSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ipamv1.IPPoolSliceSpec{Pool: pool, Range: cidr, Node: node}})
}

// TestCheckConsistentClusterExitsZero: a network whose pool, reservations, slice and status
// agree yields no finding.
func TestCheckConsistentClusterExitsZero(t *testing.T) {
	e := newLCEnv(t)
	e.node("ctlops-check-good-node")
	p := e.pool("ctlops-good", ipamv1.IPPoolSpec{Range: "10.78.0.0/24", Gateway: "10.78.0.1", NetworkName: "ctlops-good", SliceSize: 28})
	e.reservation(p, "10.78.0.2", "ctlops/a", "uid-a", "ctlops-check-good-node", "")
	e.reservation(p, "10.78.0.3", "ctlops/b", "uid-b", "ctlops-check-good-node", "")
	e.slice(ipamv1.SliceName(p.Name, 0), p.Name, "10.78.0.0/28", "ctlops-check-good-node")
	// What the controller writes for a /24 less its gateway holding two reservations.
	e.setStatusCounts(p, "253", 2, "251")
	before := e.snapshot()
	for _, f := range []string{"table", "json", "yaml"} {
		t.Run("-o "+f, func(t *testing.T) {
			out, errOut, err := runCLI(t, "--kubeconfig", e.env.Kubeconfig, "check", "--network", "ctlops-good", "-o", f)
			if err != nil {
				t.Fatalf("check of a consistent network: %v\n%s%s", err, out, errOut)
			}
			assertGolden(t, "check-consistent."+f, out)
		})
	}
	if !bytes.Equal(before, e.snapshot()) {
		t.Fatal("check changed reservations")
	}
}

// TestCheckFindsEachPlantedInconsistency plants one inconsistency of each kind in network
// ctlops-bad (and a consistent pool beside them) and expects exactly those findings.
func TestCheckFindsEachPlantedInconsistency(t *testing.T) {
	e := newLCEnv(t)
	e.node("ctlops-check-node")
	const network = "ctlops-bad"
	a := e.pool("ctlops-bad-a", ipamv1.IPPoolSpec{Range: "10.79.0.0/24", Gateway: "10.79.0.1", NetworkName: network, SliceSize: 28})
	b := e.pool("ctlops-bad-b", ipamv1.IPPoolSpec{Range: "10.79.5.0/24", NetworkName: network})
	e.reservation(a, "10.79.0.5", "ctlops/web", "uid-web", "ctlops-check-node", "")
	// The same address under a name the CEL rules allow (pool prefix) but that is not the lock
	// of its scope (the network): the allocator would never see it.
	e.reservation(a, "10.79.0.5", "ctlops/db", "uid-db", "ctlops-check-node", "ctlops-bad-a.10.79.0.5")
	e.reservation(a, "10.79.0.1", "ctlops/gw", "uid-gw", "ctlops-check-node", "")
	gone := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ctlops-bad-gone"}, Spec: ipamv1.IPPoolSpec{NetworkName: network}}
	e.reservation(gone, "10.79.1.9", "ctlops/orphan", "uid-orphan", "ctlops-check-node", "")
	e.reservation(b, "10.79.5.2", "ctlops/fine", "uid-fine", "ctlops-check-node", "")
	e.slice("ctlops-bad-a.0", a.Name, "10.79.0.0/28", "ctlops-ghost-node")
	e.slice("ctlops-bad-a.1", a.Name, "10.79.0.16/28", "ctlops-check-node")
	e.slice("ctlops-bad-a.99", a.Name, "10.80.0.0/28", "ctlops-check-node")
	// A reservation of another network's pool that says it is of this network belongs to the
	// check of its pool's network: it is no UnknownPool here.
	other := e.pool("ctlops-other-c", ipamv1.IPPoolSpec{Range: "10.79.9.0/24", NetworkName: "ctlops-other"})
	stray := e.reservation(other, "10.79.9.9", "ctlops/stray", "uid-stray", "ctlops-check-node", "ctlops-other-c.10.79.9.9")
	stray.Spec.NetworkName = network
	if err := e.c.Update(e.ctx, stray); err != nil {
		t.Fatal(err)
	}
	e.setStatusCounts(a, "253", 7, "246") // the pool holds 3
	e.setStatusCounts(b, "254", 1, "253")
	before := e.snapshot()

	want := []struct{ kind, object, text string }{
		{findingDuplicateAddress, "overlappingrangeipreservation/ctlops-bad-a.10.79.0.5", `10.79.0.5 is held 2 times in scope "ctlops-bad"`},
		{findingWrongName, "overlappingrangeipreservation/ctlops-bad-a.10.79.0.5", `whose lock is named ctlops-bad.10.79.0.5`},
		{findingNotInPool, "overlappingrangeipreservation/ctlops-bad.10.79.0.1", "IPPool ctlops-bad-a cannot hand out 10.79.0.1 (Gateway)"},
		{findingUnknownPool, "overlappingrangeipreservation/ctlops-bad.10.79.1.9", "IPPool ctlops-bad-gone, which does not exist"},
		{findingSliceUnknownNode, "ippoolslice/ctlops-bad-a.0", "node ctlops-ghost-node, which does not exist"},
		{findingSliceOutsidePool, "ippoolslice/ctlops-bad-a.99", "block 10.80.0.0/28 does not lie inside range 10.79.0.0/24"},
		{findingStatusCounts, "ippool/ctlops-bad-a", "status says capacity 253, allocated 7, free 246; the spec and the 3 reservations give capacity 253, allocated 3, free 250"},
	}
	out, _, err := runCLI(t, "--kubeconfig", e.env.Kubeconfig, "check", "--network", network, "-o", "json")
	if err == nil || err.Error() != "check found 7 inconsistencies in cluster" {
		t.Fatalf("check: %v; want 7 inconsistencies", err)
	}
	var report checkReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		t.Run(w.kind, func(t *testing.T) {
			for _, f := range report.Findings {
				if f.Kind == w.kind && f.Object == w.object && strings.Contains(f.Message, w.text) {
					return
				}
			}
			t.Fatalf("no %s finding on %s containing %q; findings %+v", w.kind, w.object, w.text, report.Findings)
		})
	}
	if len(report.Findings) != len(want) || report.Pools != 2 || report.Allocations != 5 || report.Slices != 3 {
		t.Fatalf("report %+v; want %d findings in 2 pools, 5 reservations, 3 slices", report, len(want))
	}
	for _, f := range []string{"table", "wide", "json", "yaml"} {
		t.Run("-o "+f, func(t *testing.T) {
			out, _, err := runCLI(t, "--kubeconfig", e.env.Kubeconfig, "check", "--network", network, "-o", f)
			if err == nil {
				t.Fatal("check of an inconsistent network succeeded")
			}
			assertGolden(t, "check-findings."+f, out)
		})
	}
	if !bytes.Equal(before, e.snapshot()) {
		t.Fatal("check changed reservations")
	}
}

// TestCheckFindsASliceOfAMissingPool: a slice names no network, so only a check of the whole
// cluster sees one whose pool is gone.
func TestCheckFindsASliceOfAMissingPool(t *testing.T) {
	e := newLCEnv(t)
	e.node("ctlops-orphan-node")
	e.slice("ctlops-no-such-pool.0", "ctlops-no-such-pool", "10.81.0.0/28", "ctlops-orphan-node")
	out, _, err := runCLI(t, "--kubeconfig", e.env.Kubeconfig, "check", "-o", "json")
	if err == nil {
		t.Fatal("check with a slice of a missing pool succeeded")
	}
	var report checkReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	for _, f := range report.Findings {
		if f.Kind == findingSliceUnknownPool && f.Object == "ippoolslice/ctlops-no-such-pool.0" &&
			strings.Contains(f.Message, "block 10.81.0.0/28 is carved from IPPool ctlops-no-such-pool, which does not exist") {
			return
		}
	}
	t.Fatalf("no SliceUnknownPool finding for ctlops-no-such-pool.0 in %+v", report.Findings)
}

// TestCheckReportsAPoolThatDoesNotParse: the API server refuses such a pool (its CEL rules are
// the parser's), so this pure check of the logic uses a fake client: a pool stored before a
// rule existed must be reported, not skipped in silence.
func TestCheckReportsAPoolThatDoesNotParse(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	bad := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: ipamv1.IPPoolSpec{Range: "10.0.0.0/33"}}
	c := clusterChecker{client: crclient.Reader(fake.NewClientBuilder().WithScheme(s).WithObjects(bad).Build())}
	report, err := c.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Findings) != 2 || report.Findings[0].Kind != findingInvalidPool || report.Findings[0].Object != "ippool/broken" ||
		!strings.Contains(report.Findings[0].Message, `spec.range "10.0.0.0/33"`) || report.Findings[1].Kind != findingStatusCounts {
		t.Fatalf("findings %+v; want InvalidPool naming spec.range, then StatusCounts (no status written)", report.Findings)
	}
}

// lcBoltStore writes an embedded store holding two allocations of one pool.
func lcBoltStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "netpool.db")
	s, err := boltstore.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"net1","ipam":{"range":"10.82.0.0/24","network_name":"ctlops"}}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := allocator.New(s)
	for _, id := range []string{"c1", "c2"} {
		if _, err := a.Add(context.Background(), c, allocator.Owner{ContainerID: id, IfName: "eth0"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckEmbeddedStore(t *testing.T) {
	path := lcBoltStore(t)
	for _, f := range []string{"table", "json"} {
		t.Run("consistent -o "+f, func(t *testing.T) {
			out, _, err := runCLI(t, "--db", path, "check", "-o", f)
			if err != nil {
				t.Fatalf("check of a consistent store: %v\n%s", err, out)
			}
			assertGolden(t, "check-bolt-consistent."+f, strings.ReplaceAll(out, path, "/var/lib/cni/netpool/netpool.db"))
		})
	}
	t.Run("a finding exits non-zero", func(t *testing.T) {
		damaged := lcBoltStore(t)
		db, err := bolt.Open(damaged, 0o600, &bolt.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		// The owners index lost: DEL could not find either allocation.
		if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("owners")) }); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		out, _, err := runCLI(t, "--db", damaged, "check")
		if err == nil || !strings.Contains(err.Error(), "check found 1 inconsistency in "+damaged) {
			t.Fatalf("check of a damaged store: %v", err)
		}
		assertGolden(t, "check-bolt-findings.table", out)
	})
}

func TestCheckRefusesBadArguments(t *testing.T) {
	e := newLCEnv(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not bbolt"), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.db")
	busy := lcBoltStore(t)
	s, err := boltstore.Open(busy, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A pool of another network, so that the unknown network's error has names to list.
	e.pool("ctlops-refuse", ipamv1.IPPoolSpec{Range: "10.79.0.0/24", NetworkName: "ctlops-refuse"})
	before := e.snapshot()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"a missing db", []string{"--db", missing, "check"}, "missing.db does not exist"},
		{"a corrupt db", []string{"--db", garbage, "check"}, "the database is corrupt"},
		{"a directory as db", []string{"--db", dir, "check"}, "is not a regular file"},
		{"a db a writer holds", []string{"--db", busy, "--request-timeout", "100ms", "check"}, "is locked by a writer"},
		{"--network with --db", []string{"--db", busy, "check", "--network", "x"}, "--network selects pools in a cluster"},
		{"an unknown format", []string{"--db", garbage, "check", "-o", "csv"}, `unknown output format "csv"`},
		{"an argument", []string{"check", "now"}, `unknown command "now"`},
		{"an unreachable cluster", []string{"--kubeconfig", lcUnreachableKubeconfig(t, false), "check"}, "failed to list the IPPools"},
		{"a cluster that never answers", []string{"--kubeconfig", lcUnreachableKubeconfig(t, true), "--request-timeout", "300ms", "check"}, "failed to list the IPPools"},
		{"a zero timeout", []string{"--kubeconfig", e.env.Kubeconfig, "--request-timeout", "0s", "check"}, "--request-timeout must be positive"},
		{"an unknown network", []string{"--kubeconfig", e.env.Kubeconfig, "check", "--network", "ctlops-nope"}, `--network: no pool of network "ctlops-nope" in the cluster: its networks are `},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCLI(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v: %v; want an error containing %q", tt.args, err, tt.want)
			}
			if out != "" {
				t.Fatalf("printed %q on stdout", out)
			}
		})
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("check created the missing db: %v", err)
	}
	if !bytes.Equal(before, e.snapshot()) {
		t.Fatal("a refused check changed reservations")
	}
}
