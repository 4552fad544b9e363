package gc

import (
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestPodChangedForGC(t *testing.T) {
	p := podChangedForGC()
	pod := func(phase corev1.PodPhase, status string) *corev1.Pod {
		o := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Status: corev1.PodStatus{Phase: phase}}
		if status != "" {
			o.Annotations = map[string]string{nadv1.NetworkStatusAnnot: status}
		}
		return o
	}
	running := pod(corev1.PodRunning, "a")
	tests := []struct {
		name string
		pass bool
		got  bool
	}{
		{"a pod created after start", true, p.Create(event.CreateEvent{Object: running})},
		{"a pod of the initial list", false, p.Create(event.CreateEvent{Object: running, IsInInitialList: true})},
		{"a deletion", true, p.Delete(event.DeleteEvent{Object: running})},
		{"a phase change", true, p.Update(event.UpdateEvent{ObjectOld: running, ObjectNew: pod(corev1.PodSucceeded, "a")})},
		{"a network-status change", true, p.Update(event.UpdateEvent{ObjectOld: running, ObjectNew: pod(corev1.PodRunning, "b")})},
		{"a network-status written", true, p.Update(event.UpdateEvent{ObjectOld: pod(corev1.PodRunning, ""), ObjectNew: running})},
		{"any other update", false, p.Update(event.UpdateEvent{ObjectOld: running, ObjectNew: pod(corev1.PodRunning, "a")})},
		{"an update of something else", true, p.Update(event.UpdateEvent{ObjectOld: &corev1.Node{}, ObjectNew: &corev1.Node{}})},
		{"a generic event", false, p.Generic(event.GenericEvent{Object: running})},
	}
	for _, tt := range tests {
		if tt.got != tt.pass {
			t.Errorf("%s: passes = %v, want %v", tt.name, tt.got, tt.pass)
		}
	}
}
