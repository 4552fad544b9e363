package index_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/index"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

func TestIndexFunctions(t *testing.T) {
	// ext is the extract function of the index named name on obj's kind.
	ext := func(obj client.Object, name string) client.IndexerFunc {
		for _, f := range index.All() {
			if f.Name == name && fmt.Sprintf("%T", f.Obj) == fmt.Sprintf("%T", obj) {
				return f.Extract
			}
		}
		t.Fatalf("no index %s of %T", name, obj)
		return nil
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	res := ctrltest.NewReservation("p", "10.0.0.5", pod, "node-a")
	sl := &ipamv1.IPPoolSlice{Spec: ipamv1.IPPoolSliceSpec{Pool: "p", Node: "node-a"}}
	pool := &ipamv1.IPPool{Spec: ipamv1.IPPoolSpec{NetworkName: "blue"}}
	claimed := ctrltest.NewReservation("p", "10.0.0.6", pod, "node-a")
	claimed.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "vm-a.net1"}
	migrated := claimed.DeepCopy()
	migrated.Spec.PodRef = "vms/launcher-2"
	migrated.Spec.Users = []ipamv1.ReservationUser{{ContainerID: "a", IfName: "net1", PodRef: "vms/launcher-1", Node: "node-a"},
		{ContainerID: "b", IfName: "net1", PodRef: "vms/launcher-2", Node: "node-b"}, {ContainerID: "c", IfName: "net1", Node: "node-c"}}
	nad := func(ipam string) *nadv1.NetworkAttachmentDefinition { return ctrltest.TestNAD(ctrltest.Conflist(ipam)) }
	tests := []struct {
		name    string
		extract client.IndexerFunc
		obj     client.Object
		want    string
	}{
		{"reservation by pod", ext(&ipamv1.OverlappingRangeIPReservation{}, index.ReservationPod), res, "ns/web"},
		{"reservation without pod", ext(&ipamv1.OverlappingRangeIPReservation{}, index.ReservationPod), ctrltest.NewReservation("p", "10.0.0.5", nil, "n"), ""},
		{"reservation by its holder's and users' pods", ext(&ipamv1.OverlappingRangeIPReservation{}, index.ReservationPod), migrated, "vms/launcher-2 vms/launcher-1"},
		{"reservation by node", ext(&ipamv1.OverlappingRangeIPReservation{}, index.ReservationNode), res, "node-a"},
		{"reservation without node", ext(&ipamv1.OverlappingRangeIPReservation{}, index.ReservationNode), ctrltest.NewReservation("p", "10.0.0.5", nil, ""), ""},
		{"reservation by node and pool", ext(&ipamv1.OverlappingRangeIPReservation{}, index.ReservationNodePool), res, "node-a/p"},
		{"reservation by persistent owner", ext(&ipamv1.OverlappingRangeIPReservation{}, index.ReservationOwner), claimed, "IPAMClaim/vms/vm-a.net1"},
		{"reservation without a persistent owner", ext(&ipamv1.OverlappingRangeIPReservation{}, index.ReservationOwner), res, ""},
		{"slice by node", ext(&ipamv1.IPPoolSlice{}, index.SliceNode), sl, "node-a"},
		{"slice by node and pool", ext(&ipamv1.IPPoolSlice{}, index.SliceNodePool), sl, "node-a/p"},
		{"pool by network", ext(&ipamv1.IPPool{}, index.PoolNetwork), pool, "blue"},
		{"NAD with inline ranges", index.NADPools, nad(`{"type":"netpool","datastore":"kubernetes","network_name":"blue",
			"ipRanges":[{"range":"10.0.0.0/24"},{"range":"fd00::/64"}]}`), "blue-10.0.0.0-24 blue-fd00---64"},
		{"NAD with a pool reference", index.NADPools, nad(`{"type":"netpool","datastore":"kubernetes","pool":"shared"}`), "shared"},
		{"NAD on the embedded store", index.NADPools, nad(`{"type":"netpool","range":"10.0.0.0/24"}`), ""},
		{"NAD with a bad config", index.NADPools, nad(`{"type":"netpool","range":"bad"}`), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(tt.extract(tt.obj), " "); got != tt.want {
				t.Fatalf("values %q, want %q", got, tt.want)
			}
		})
	}
	// Every extractor ignores objects of another kind.
	for _, ix := range index.All() {
		if got := ix.Extract(&corev1.ConfigMap{}); got != nil {
			t.Errorf("index %s of %T gives %q for a ConfigMap", ix.Name, ix.Obj, got)
		}
	}
}

// recordingIndexer records the indexes registered, and fails on the field named fail.
type recordingIndexer struct {
	fields []string
	fail   string
}

func (r *recordingIndexer) IndexField(_ context.Context, obj client.Object, field string, _ client.IndexerFunc) error {
	if field == r.fail {
		return ctrltest.ErrExpected
	}
	r.fields = append(r.fields, ctrltest.TypeName(obj)+" "+field)
	return nil
}

func TestSetupIndexes(t *testing.T) {
	idx := &recordingIndexer{}
	if err := index.Setup(context.Background(), idx, index.All()); err != nil {
		t.Fatal(err)
	}
	if len(idx.fields) != len(index.All()) || !slices.Contains(idx.fields, "*v1alpha1.OverlappingRangeIPReservation spec.podRef") {
		t.Fatalf("registered %q", idx.fields)
	}
	err := index.Setup(context.Background(), &recordingIndexer{fail: index.PoolNetwork}, index.Base())
	if err == nil || err.Error() != "failed to index *v1alpha1.IPPool by spec.networkName: injected failure" {
		t.Fatalf("error %v", err)
	}
}
