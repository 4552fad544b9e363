package slim

import (
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/internal/gcpolicy"
)

func TestSlimTransformsKeepWhatTheReconcilersRead(t *testing.T) {
	now := metav1.Now()
	meta := metav1.ObjectMeta{
		Name: "x", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 2, CreationTimestamp: now, DeletionTimestamp: &now,
		Labels:          map[string]string{"team": "red"},
		Annotations:     map[string]string{nadv1.NetworkStatusAnnot: "[]", gcpolicy.MirrorAnnotation: "h", gcpolicy.ConfigHashAnnotation: "h", "big": "drop me"},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		OwnerReferences: []metav1.OwnerReference{{Name: "rs"}, {Name: "router", Controller: ptr.To(true)}},
	}
	kept := metav1.ObjectMeta{Name: "x", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 2, CreationTimestamp: now, DeletionTimestamp: &now}

	pod := &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.5", Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue, Reason: "r"}}}}
	got, err := slimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	wantPod := &corev1.Pod{ObjectMeta: *kept.DeepCopy(), Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	wantPod.OwnerReferences = []metav1.OwnerReference{{Name: "router", Controller: ptr.To(true)}}
	wantPod.Annotations = map[string]string{nadv1.NetworkStatusAnnot: "[]", gcpolicy.MirrorAnnotation: "h", gcpolicy.ConfigHashAnnotation: "h"}
	if !equality.Semantic.DeepEqual(got, wantPod) {
		t.Errorf("slim pod %+v, want %+v", got, wantPod)
	}
	noStatus := pod.DeepCopy()
	noStatus.Annotations = nil
	if got, _ := slimPod(noStatus); got.(*corev1.Pod).Annotations != nil {
		t.Errorf("a pod without network-status got annotations %v", got.(*corev1.Pod).Annotations)
	}

	node := &corev1.Node{ObjectMeta: meta, Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"big"}}}}}
	if got, _ := slimNode(node); !equality.Semantic.DeepEqual(got, &corev1.Node{ObjectMeta: kept}) {
		t.Errorf("slim node %+v", got)
	}
	ns := &corev1.Namespace{ObjectMeta: meta, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}}
	wantNS := &corev1.Namespace{ObjectMeta: *kept.DeepCopy()}
	wantNS.Labels = map[string]string{"team": "red"}
	if got, _ := slimNamespace(ns); !equality.Semantic.DeepEqual(got, wantNS) {
		t.Errorf("slim namespace %+v", got)
	}

	// Anything else (a tombstone) passes unchanged.
	tomb := toolscache.DeletedFinalStateUnknown{Key: "ns/x"}
	for _, f := range []toolscache.TransformFunc{slimPod, slimNode, slimNamespace} {
		if got, err := f(tomb); err != nil || got != tomb {
			t.Errorf("a tombstone became %v, %v", got, err)
		}
	}
	if opts := CacheOptions(); opts.DefaultTransform == nil || len(opts.ByObject) != 3 {
		t.Errorf("cache options %+v", opts)
	}
}

func TestSlimPodKeepsWhatTheEgressRouterReconcilerCompares(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "er", Namespace: "ns",
		Labels: map[string]string{networkv1.RouterLabel: "er", "app": "egress-router-cni", "other": "x"},
		Annotations: map[string]string{networkv1.ConfigHashAnnotation: "h", nadv1.NetworkAttachmentAnnot: "[]",
			"kubectl.kubernetes.io/last-applied-configuration": "big"},
	}}
	got, err := slimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	slim := got.(*corev1.Pod)
	if !equality.Semantic.DeepEqual(slim.Labels, map[string]string{networkv1.RouterLabel: "er", "app": "egress-router-cni"}) ||
		!equality.Semantic.DeepEqual(slim.Annotations, map[string]string{networkv1.ConfigHashAnnotation: "h", nadv1.NetworkAttachmentAnnot: "[]"}) {
		t.Errorf("slim router pod labels %v annotations %v", slim.Labels, slim.Annotations)
	}
	other := pod.DeepCopy()
	delete(other.Annotations, networkv1.ConfigHashAnnotation)
	got, _ = slimPod(other)
	if slim := got.(*corev1.Pod); slim.Labels != nil || slim.Annotations != nil {
		t.Errorf("a pod that is no router's kept labels %v annotations %v", slim.Labels, slim.Annotations)
	}
}
