package cli

import (
	"context"
	"encoding/json"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/boltstore"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// twoTo64 is the number of addresses of an IPv6 /64.
var twoTo64 = new(big.Int).Lsh(big.NewInt(1), 64)

// assertPoolStates checks what pools says of an exhausted pool and of an IPv6 /64 (named
// exhausted and huge), in its table (out) and its json (doc): the table names the exhausted
// state and prints the /64's capacity readably, the json keeps it exact.
func assertPoolStates(t *testing.T, out, doc, exhausted, huge string) {
	t.Helper()
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = l
		}
	}
	if r := rows[exhausted]; !strings.Contains(r, "100.0% (Exhausted)") {
		t.Errorf("the exhausted pool's row does not say so: %q", r)
	}
	if r := rows[huge]; !strings.Contains(r, " 18.4E ") {
		t.Errorf("the /64's row does not print its capacity as 18.4E: %q", r)
	}
	var list struct {
		Items []struct {
			Name, Capacity, Free string
			Exhausted            bool
		}
	}
	if err := json.Unmarshal([]byte(doc), &list); err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		capacity, ok := new(big.Int).SetString(p.Capacity, 10)
		switch p.Name {
		case exhausted:
			if !p.Exhausted || p.Free != "0" {
				t.Errorf("json of the exhausted pool: %+v", p)
			}
		case huge:
			// The window less what the pool keeps back (the subnet-router anycast address): exact,
			// within a few of 2^64.
			if !ok || p.Exhausted || new(big.Int).Sub(twoTo64, capacity).CmpAbs(big.NewInt(4)) > 0 {
				t.Errorf("json of the /64: capacity %q, want the exact count near 2^64 (%s)", p.Capacity, twoTo64)
			}
		}
	}
}

// TestPoolStatesBolt: on an embedded store, an exhausted pool and an IPv6 /64 (golden and checked).
func TestPoolStatesBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netpool.db")
	s, err := boltstore.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a := allocator.New(s)
	add := func(ipamJSON, container string) error {
		c, err := ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"states","ipam":`+ipamJSON+`}`), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Add(context.Background(), c, allocator.Owner{ContainerID: container, IfName: "net1"})
		return err
	}
	small := `{"type":"netpool","network_name":"small","range":"10.79.0.0/29","range_start":"10.79.0.2","range_end":"10.79.0.3"}`
	for _, id := range []string{"c1", "c2"} {
		if err := add(small, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := add(small, "c3"); err == nil {
		t.Fatal("a third address from a window of two")
	}
	if err := add(`{"type":"netpool","network_name":"huge","range":"fd00:79::/64"}`, "c4"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	now := viewClock()
	outs := map[string]string{}
	for _, f := range []string{"table", "json"} {
		out, errOut, err := runView(t, now, "", "--db", path, "-o", f, "pools")
		if err != nil {
			t.Fatalf("%v (stderr %q)", err, errOut)
		}
		outs[f] = out
		assertGolden(t, "bolt/pools-states."+f, normaliseGolden(out))
	}
	assertPoolStates(t, outs["table"], outs["json"], "small/10.79.0.0/29", "huge/fd00:79::/64")
}

// TestPoolStatesCluster: the same in a cluster, where the controller's conditions say
// PoolExhausted (written here as it writes them) and READY shows it.
func TestPoolStatesCluster(t *testing.T) {
	e := newLCEnv(t)
	small := e.pool("ctlstates-small", ipamv1.IPPoolSpec{Range: "10.79.0.0/29", RangeStart: "10.79.0.2", RangeEnd: "10.79.0.3", NetworkName: "ctlstates"})
	e.reservation(small, "10.79.0.2", "ctlstates/a", "uid-a", "node-a", "")
	e.reservation(small, "10.79.0.3", "ctlstates/b", "uid-b", "node-a", "")
	huge := e.pool("ctlstates-huge", ipamv1.IPPoolSpec{Range: "fd00:79::/64", NetworkName: "ctlstates"})
	e.reservationWith(huge, "fd00:79::2", "ctlstates/a", "uid-a", "node-a", func(r *ipamv1.OverlappingRangeIPReservation) {
		r.Spec.ContainerID = "ctr-v6" // the helper's ID of the address would hold colons
	})
	meta.SetStatusCondition(&small.Status.Conditions, metav1.Condition{Type: ipamv1.IPPoolReadyCondition, Status: metav1.ConditionFalse,
		Reason: ipamv1.IPPoolExhaustedReason, Message: "no address is free"})
	meta.SetStatusCondition(&small.Status.Conditions, metav1.Condition{Type: ipamv1.IPPoolExhaustedCondition, Status: metav1.ConditionTrue,
		Reason: ipamv1.IPPoolExhaustedReason, Message: "no address is free"})
	e.setStatusCounts(small, "2", 2, "0")
	now := viewClock()
	outs := map[string]string{}
	for _, f := range []string{"table", "json"} {
		out, errOut, err := runView(t, now, "", "--kubeconfig", e.env.Kubeconfig, "-o", f, "pools", "--network", "ctlstates")
		if err != nil {
			t.Fatalf("%v (stderr %q)", err, errOut)
		}
		outs[f] = out
		assertGolden(t, "cluster/pools-states."+f, normaliseGolden(out))
	}
	assertPoolStates(t, outs["table"], outs["json"], "ctlstates-small", "ctlstates-huge")
	if !strings.Contains(outs["table"], "False (PoolExhausted)") {
		t.Errorf("READY does not show the controller's PoolExhausted:\n%s", outs["table"])
	}
}
