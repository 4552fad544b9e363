package gc

import (
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// podChangedForGC passes the pod events that can change a GC verdict: a pod deleted; a pod
// created after start (a pod recreated under the same name); a pod whose phase or network-status
// changed. The pods of the initial list are judged through their reservations' own initial
// events, and the status updates a running pod gets all the time change nothing.
func podChangedForGC() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return !e.IsInInitialList },
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldPod, okOld := e.ObjectOld.(*corev1.Pod)
			newPod, okNew := e.ObjectNew.(*corev1.Pod)
			if !okOld || !okNew {
				return true
			}
			return oldPod.Status.Phase != newPod.Status.Phase ||
				oldPod.Annotations[nadv1.NetworkStatusAnnot] != newPod.Annotations[nadv1.NetworkStatusAnnot]
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
