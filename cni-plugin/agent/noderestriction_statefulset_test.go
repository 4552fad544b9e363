package agent

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/podowner"
	"github.com/netpool/netpool/test/envtest"
)

// testStatefulSetTakeOver reschedules a StatefulSet's pod from node-a to node-b through the agents
// under their pod-bound tokens: node-b finds the ordinal's address by the owner label and takes it
// over (the node-isolation exception for persistently owned reservations), and node-a can then
// neither take it back from node-b's pod nor delete it.
func testStatefulSetTakeOver(t *testing.T, env *envtest.Env, sh *shim, na, nb *running, ca client.Client) {
	ctx := context.Background()
	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db"}}}}},
	}
	if err := env.Client.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	newPod := func() *corev1.Pod {
		t.Helper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-0",
				Labels:          map[string]string{"app": "db", podowner.PodIndexLabel: "0"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: sts.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db"}}},
		}
		if err := env.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	extra := `,"range":"10.84.2.0/24","statefulSets":"Sticky"`
	const args = "K8S_POD_NAMESPACE=default;K8S_POD_NAME=db-0"
	pod := newPod()
	out, err := sh.call("ADD", "db0-a", args, netConf("iso-sts", na.socket, extra))
	if err != nil {
		t.Fatalf("ADD of db-0 on node-a: %v", err)
	}
	x := firstIP(t, out)
	if _, err := sh.call("DEL", "db0-a", args, netConf("iso-sts", na.socket, extra)); err != nil {
		t.Fatalf("DEL of db-0 on node-a: %v", err)
	}
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	newPod()
	out, err = sh.call("ADD", "db0-b", args, netConf("iso-sts", nb.socket, extra))
	if err != nil {
		t.Fatalf("ADD of db-0 rescheduled on node-b: %v", err)
	}
	if got := firstIP(t, out); got != x {
		t.Fatalf("db-0 rescheduled on node-b got %s, on node-a it had %s", got, x)
	}
	var list ipamv1.OverlappingRangeIPReservationList
	if err := env.Client.List(ctx, &list, client.MatchingFields{"spec.containerID": "db0-b"}); err != nil || len(list.Items) != 1 {
		t.Fatalf("reservation of db-0 on node-b: %d, %v", len(list.Items), err)
	}
	r := &list.Items[0]
	if r.Spec.Node != "node-b" || r.Labels[ipamv1.NodeLabel] != "node-b" || r.Spec.Owner == nil || r.Spec.Owner.Kind != ipamv1.OwnerStatefulSet {
		t.Fatalf("after the take-over the reservation is %+v %v, want node-b's, owned by the StatefulSet", r.Spec, r.Labels)
	}
	back := r.DeepCopy()
	back.Spec.Node, back.Labels[ipamv1.NodeLabel] = "node-a", "node-a"
	back.Spec.Users = nil
	wantDenied(t, ca.Update(ctx, back, client.DryRunAll),
		"node node-a may not drop or change the users of other nodes of reservation "+r.Name+" (db0-b on node node-b)")
	wantDenied(t, ca.Delete(ctx, r.DeepCopy(), client.DryRunAll), "node node-a may not delete overlappingrangeipreservations "+r.Name+" of node node-b")
}
