package podowner

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestStatefulSet(t *testing.T) {
	pod := func(name string, labels map[string]string, refs ...metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, Labels: labels, OwnerReferences: refs}}
	}
	sts := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: ptr.To(true)}
	notController := sts
	notController.Controller = nil
	otherGroup := sts
	otherGroup.APIVersion = "apps.kruise.io/v1beta1"
	rs := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", Controller: ptr.To(true)}
	for _, tt := range []struct {
		name    string
		pod     *corev1.Pod
		want    string // the owner's key; "" for none
		wantErr string
	}{
		{name: "name and label agree", pod: pod("db-2", map[string]string{PodIndexLabel: "2"}, sts), want: "StatefulSet/apps/db/2/net1"},
		{name: "ordinal from the name, no label", pod: pod("db-10", nil, sts), want: "StatefulSet/apps/db/10/net1"},
		{name: "ordinal 0 from the name", pod: pod("db-0", nil, sts), want: "StatefulSet/apps/db/0/net1"},
		{name: "no owner", pod: pod("db-0", nil)},
		{name: "a ReplicaSet's pod", pod: pod("web-abc12", nil, rs)},
		{name: "a StatefulSet that is not the controller", pod: pod("db-0", nil, notController)},
		{name: "a StatefulSet of another group", pod: pod("db-0", nil, otherGroup)},
		// An imposter: any pod creator can write the owner reference and the label of db-0.
		{name: "an imposter with db-0's label", pod: pod("imposter", map[string]string{PodIndexLabel: "0"}, sts),
			wantErr: "pod apps/imposter of StatefulSet db: its name is not db-<ordinal>, as the StatefulSet's own pods are named"},
		{name: "the label disagrees with the name", pod: pod("db-2", map[string]string{PodIndexLabel: "7"}, sts),
			wantErr: `pod apps/db-2 of StatefulSet db: its label apps.kubernetes.io/pod-index="7" disagrees with the ordinal 2 of its name`},
		{name: "name without the StatefulSet's prefix", pod: pod("cache-1", nil, sts),
			wantErr: "pod apps/cache-1 of StatefulSet db: its name is not db-<ordinal>"},
		{name: "name suffix not a number", pod: pod("db-x", map[string]string{PodIndexLabel: "0"}, sts),
			wantErr: `pod apps/db-x of StatefulSet db: ordinal "x" (from its name) is not a number from 0 to 2147483647 without leading zeros`},
		{name: "leading zero", pod: pod("db-01", nil, sts), wantErr: `ordinal "01" (from its name)`},
		{name: "a label with a leading zero", pod: pod("db-1", map[string]string{PodIndexLabel: "01"}, sts),
			wantErr: `label apps.kubernetes.io/pod-index="01" disagrees with the ordinal 1`},
		{name: "negative label", pod: pod("db-1", map[string]string{PodIndexLabel: "-1"}, sts),
			wantErr: `label apps.kubernetes.io/pod-index="-1" disagrees`},
		{name: "beyond int32", pod: pod("db-2147483648", nil, sts), wantErr: `ordinal "2147483648" (from its name)`},
		{name: "a long label is cut", pod: pod("db-1", map[string]string{PodIndexLabel: strings.Repeat("9", 40)}, sts),
			wantErr: `="9999999999999999..." disagrees`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := StatefulSet(tt.pod, "net1")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if o != nil {
				got = o.Key()
			}
			if got != tt.want {
				t.Fatalf("owner %q, want %q", got, tt.want)
			}
		})
	}
}
