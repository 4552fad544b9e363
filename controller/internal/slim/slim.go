// Package slim keeps the controller's informer cache small: the manager's cache options, which the
// reconcilers' tests run over too, so that they read only what the cache keeps.
package slim

import (
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/internal/gcpolicy"
)

// CacheOptions keep the informer cache small: every object loses its managedFields, and pods,
// nodes and namespaces keep only what the reconcilers read. A cluster's pods and nodes are the
// biggest objects the controller watches (a node's status lists its images), and it needs only a
// pod's identity, node, phase and network-status, a node's existence, and a namespace's labels.
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:       {Transform: slimPod},
			&corev1.Node{}:      {Transform: slimNode},
			&corev1.Namespace{}: {Transform: slimNamespace},
		},
	}
}

// slimPod keeps a pod's identity, deletion mark, node, phase, network-status annotation and, for
// a mirror pod, the UID of its static pod. For the EgressRouter reconciler it also keeps the
// controller reference and the Ready condition (a handful of bytes per pod), and on a router's pod
// the config hash, the networks annotation and the router's labels. Anything else (a tombstone) passes unchanged.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{
		TypeMeta:   pod.TypeMeta,
		ObjectMeta: slimMeta(&pod.ObjectMeta),
		Spec:       corev1.PodSpec{NodeName: pod.Spec.NodeName},
		Status:     corev1.PodStatus{Phase: pod.Status.Phase},
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		slim.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			slim.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	kept := []string{nadv1.NetworkStatusAnnot, gcpolicy.MirrorAnnotation, gcpolicy.ConfigHashAnnotation, networkv1.ConfigHashAnnotation}
	if _, router := pod.Annotations[networkv1.ConfigHashAnnotation]; router {
		// An EgressRouter pod: what the reconciler sets on it, so that it can see drift.
		kept = append(kept, nadv1.NetworkAttachmentAnnot)
		for _, k := range []string{networkv1.RouterLabel, networkv1.OpenShiftPodLabel} {
			if v, ok := pod.Labels[k]; ok {
				if slim.Labels == nil {
					slim.Labels = map[string]string{}
				}
				slim.Labels[k] = v
			}
		}
	}
	for _, k := range kept {
		if v, ok := pod.Annotations[k]; ok {
			if slim.Annotations == nil {
				slim.Annotations = map[string]string{}
			}
			slim.Annotations[k] = v
		}
	}
	return slim, nil
}

// slimNode keeps a node's identity.
func slimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{TypeMeta: node.TypeMeta, ObjectMeta: slimMeta(&node.ObjectMeta)}, nil
}

// slimNamespace keeps a namespace's identity and labels, which pools' namespaceSelectors match.
func slimNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	meta := slimMeta(&ns.ObjectMeta)
	meta.Labels = ns.Labels
	return &corev1.Namespace{TypeMeta: ns.TypeMeta, ObjectMeta: meta}, nil
}

// slimMeta is the part of an object's metadata that identifies it and its version.
func slimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Generation:        m.Generation,
		CreationTimestamp: m.CreationTimestamp,
		DeletionTimestamp: m.DeletionTimestamp,
	}
}

var _ toolscache.TransformFunc = slimPod
