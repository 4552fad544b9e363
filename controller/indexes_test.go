package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

func TestIndexFunctions(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	res := newReservation("p", "10.0.0.5", pod, "node-a")
	sl := &ipamv1.IPPoolSlice{Spec: ipamv1.IPPoolSliceSpec{Pool: "p", Node: "node-a"}}
	pool := &ipamv1.IPPool{Spec: ipamv1.IPPoolSpec{NetworkName: "blue"}}
	claimed := newReservation("p", "10.0.0.6", pod, "node-a")
	claimed.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "vm-a.net1"}
	migrated := claimed.DeepCopy()
	migrated.Spec.PodRef = "vms/launcher-2"
	migrated.Spec.Users = []ipamv1.ReservationUser{{ContainerID: "a", IfName: "net1", PodRef: "vms/launcher-1", Node: "node-a"},
		{ContainerID: "b", IfName: "net1", PodRef: "vms/launcher-2", Node: "node-b"}, {ContainerID: "c", IfName: "net1", Node: "node-c"}}
	nad := func(ipam string) *nadv1.NetworkAttachmentDefinition { return testNAD(conflist(ipam)) }
	tests := []struct {
		name    string
		extract client.IndexerFunc
		obj     client.Object
		want    string
	}{
		{"reservation by pod", reservationPod, res, "ns/web"},
		{"reservation without pod", reservationPod, newReservation("p", "10.0.0.5", nil, "n"), ""},
		{"reservation by its holder's and users' pods", reservationPod, migrated, "vms/launcher-2 vms/launcher-1"},
		{"reservation by node", reservationNode, res, "node-a"},
		{"reservation without node", reservationNode, newReservation("p", "10.0.0.5", nil, ""), ""},
		{"reservation by node and pool", reservationNodePool, res, "node-a/p"},
		{"reservation by persistent owner", reservationOwner, claimed, "IPAMClaim/vms/vm-a.net1"},
		{"reservation without a persistent owner", reservationOwner, res, ""},
		{"slice by node", sliceNode, sl, "node-a"},
		{"slice by node and pool", sliceNodePool, sl, "node-a/p"},
		{"pool by network", poolNetwork, pool, "blue"},
		{"NAD with inline ranges", nadPools, nad(`{"type":"netpool","datastore":"kubernetes","network_name":"blue",
			"ipRanges":[{"range":"10.0.0.0/24"},{"range":"fd00::/64"}]}`), "blue-10.0.0.0-24 blue-fd00---64"},
		{"NAD with a pool reference", nadPools, nad(`{"type":"netpool","datastore":"kubernetes","pool":"shared"}`), "shared"},
		{"NAD on the embedded store", nadPools, nad(`{"type":"netpool","range":"10.0.0.0/24"}`), ""},
		{"NAD with a bad config", nadPools, nad(`{"type":"netpool","range":"bad"}`), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(tt.extract(tt.obj), " "); got != tt.want {
				t.Fatalf("values %q, want %q", got, tt.want)
			}
		})
	}
	// Every extractor ignores objects of another kind.
	for _, ix := range fieldIndexes() {
		if got := ix.extract(&corev1.ConfigMap{}); got != nil {
			t.Errorf("index %s of %T gives %q for a ConfigMap", ix.field, ix.obj, got)
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
		return errExpected
	}
	r.fields = append(r.fields, typeName(obj)+" "+field)
	return nil
}

func TestSetupIndexes(t *testing.T) {
	idx := &recordingIndexer{}
	if err := setupIndexes(context.Background(), idx, fieldIndexes()); err != nil {
		t.Fatal(err)
	}
	if len(idx.fields) != len(fieldIndexes()) || !slices.Contains(idx.fields, "*v1alpha1.OverlappingRangeIPReservation spec.podRef") {
		t.Fatalf("registered %q", idx.fields)
	}
	err := setupIndexes(context.Background(), &recordingIndexer{fail: poolNetworkField}, baseIndexes())
	if err == nil || err.Error() != "failed to index *v1alpha1.IPPool by spec.networkName: injected failure" {
		t.Fatalf("error %v", err)
	}
}
