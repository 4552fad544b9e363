package gcpolicy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

func TestJudgeReservation(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	const grace = time.Minute
	reservation := func(age time.Duration, podRef, uid, addr string) *ipamv1.OverlappingRangeIPReservation {
		return &ipamv1.OverlappingRangeIPReservation{
			ObjectMeta: metav1.ObjectMeta{Name: "r", CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Spec:       ipamv1.OverlappingRangeIPReservationSpec{Address: addr, Pool: "p", PodRef: podRef, PodUID: uid},
		}
	}
	pod := func(uid string, phase corev1.PodPhase, status string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: types.UID(uid)},
			Status:     corev1.PodStatus{Phase: phase},
		}
		if status != "" {
			p.Annotations = map[string]string{nadv1.NetworkStatusAnnot: status}
		}
		return p
	}
	mirror := pod("api-uid", corev1.PodRunning, networkStatus("10.0.0.5"))
	mirror.Annotations[MirrorAnnotation] = "static-uid"
	mirror.Annotations[ConfigHashAnnotation] = "static-uid"
	notMirror := pod("api-uid", corev1.PodRunning, "")
	notMirror.Annotations = map[string]string{ConfigHashAnnotation: "static-uid"}
	terminating := pod("u1", corev1.PodRunning, networkStatus("10.0.0.9"))
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	old := 2 * grace
	tests := []struct {
		name        string
		res         *ipamv1.OverlappingRangeIPReservation
		pod         *corev1.Pod
		wantReason  string
		wantRecheck time.Duration
		wantDetail  string
	}{
		{name: "no pod identity is never released", res: reservation(old, "", "", "10.0.0.5")},
		{name: "younger than the grace is judged again later", res: reservation(20*time.Second, "ns/web", "u1", "10.0.0.5"),
			wantRecheck: 40 * time.Second},
		{name: "younger than the grace even when its pod is gone", res: reservation(grace-time.Nanosecond, "ns/web", "u1", "10.0.0.5"),
			wantRecheck: time.Nanosecond},
		{name: "pod deleted", res: reservation(old, "ns/web", "u1", "10.0.0.5"),
			wantReason: ReasonPodDeleted, wantDetail: "pod ns/web no longer exists"},
		{name: "exactly at the grace is judged", res: reservation(grace, "ns/web", "u1", "10.0.0.5"),
			wantReason: ReasonPodDeleted},
		{name: "pod recreated under the same name", res: reservation(old, "ns/web", "u1", "10.0.0.5"), pod: pod("u2", corev1.PodRunning, ""),
			wantReason: ReasonPodReplaced, wantDetail: "pod ns/web now has UID u2; the address was reserved for UID u1"},
		{name: "a static pod's mirror answers to the static UID", res: reservation(old, "ns/web", "static-uid", "10.0.0.5"), pod: mirror},
		{name: "a mirror pod of another static pod", res: reservation(old, "ns/web", "older-static-uid", "10.0.0.5"), pod: mirror,
			wantReason: ReasonPodReplaced},
		{name: "a config hash alone does not make a mirror", res: reservation(old, "ns/web", "static-uid", "10.0.0.5"), pod: notMirror,
			wantReason: ReasonPodReplaced},
		{name: "no recorded UID compares names only", res: reservation(old, "ns/web", "", "10.0.0.5"), pod: pod("u2", corev1.PodRunning, "")},
		{name: "pod succeeded", res: reservation(old, "ns/web", "u1", "10.0.0.5"), pod: pod("u1", corev1.PodSucceeded, ""),
			wantReason: ReasonPodFinished, wantDetail: "pod ns/web has Succeeded"},
		{name: "pod failed", res: reservation(old, "ns/web", "u1", "10.0.0.5"), pod: pod("u1", corev1.PodFailed, networkStatus("10.0.0.5")),
			wantReason: ReasonPodFinished},
		{name: "pending pod keeps it (an ADD may be running)", res: reservation(old, "ns/web", "u1", "10.0.0.5"),
			pod: pod("u1", corev1.PodPending, networkStatus("10.0.0.9"))},
		{name: "phase unknown keeps it", res: reservation(old, "ns/web", "u1", "10.0.0.5"), pod: pod("u1", corev1.PodUnknown, networkStatus("10.0.0.9"))},
		{name: "terminating pod keeps it", res: reservation(old, "ns/web", "u1", "10.0.0.5"), pod: terminating},
		{name: "running without network-status keeps it", res: reservation(old, "ns/web", "u1", "10.0.0.5"), pod: pod("u1", corev1.PodRunning, "")},
		{name: "running with the address in network-status", res: reservation(old, "ns/web", "u1", "10.0.0.5"),
			pod: pod("u1", corev1.PodRunning, networkStatus("192.0.2.1", "10.0.0.5"))},
		{name: "IPv6 in another spelling", res: reservation(old, "ns/web", "u1", "fd00::5"),
			pod: pod("u1", corev1.PodRunning, networkStatus("FD00:0::5/64"))},
		{name: "running without the address in network-status", res: reservation(old, "ns/web", "u1", "10.0.0.5"),
			pod:        pod("u1", corev1.PodRunning, networkStatus("10.0.0.6")),
			wantReason: ReasonNotInNetworkStatus, wantDetail: "pod ns/web is running and its network-status does not list 10.0.0.5"},
		{name: "an empty network-status lists nothing", res: reservation(old, "ns/web", "u1", "10.0.0.5"),
			pod: pod("u1", corev1.PodRunning, "[]"), wantReason: ReasonNotInNetworkStatus},
		{name: "a malformed network-status proves nothing", res: reservation(old, "ns/web", "u1", "10.0.0.5"),
			pod: pod("u1", corev1.PodRunning, "{not json"), wantDetail: "is not a list of network statuses"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Judge(tt.res, Facts{Pod: tt.pod}, now, grace)
			if v.Reason != tt.wantReason || v.Recheck != tt.wantRecheck {
				t.Fatalf("verdict %+v, want reason %q recheck %s", v, tt.wantReason, tt.wantRecheck)
			}
			if !strings.Contains(v.Detail, tt.wantDetail) || (tt.wantDetail == "" && tt.wantReason == "" && v.Detail != "") {
				t.Fatalf("detail %q, want it to contain %q", v.Detail, tt.wantDetail)
			}
		})
	}
}

// networkStatus is a network-status annotation listing ips on one attachment.
func networkStatus(ips ...string) string {
	data, err := json.Marshal([]nadv1.NetworkStatus{{Name: "default/net1", Interface: "net1", IPs: ips}})
	if err != nil {
		panic(err)
	}
	return string(data)
}
