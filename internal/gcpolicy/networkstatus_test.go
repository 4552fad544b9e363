package gcpolicy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNetworkStatusAddrs(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        []string
		wantPresent bool
		wantErr     string
	}{
		{name: "no annotation"},
		{name: "other annotations only", annotations: map[string]string{"a": "b"}},
		{name: "two attachments", wantPresent: true, want: []string{"10.244.0.5", "10.0.0.5", "fd00::5"},
			annotations: map[string]string{nadv1.NetworkStatusAnnot: `[
				{"name":"cbr0","interface":"eth0","ips":["10.244.0.5"],"default":true},
				{"name":"ns/net1","interface":"net1","ips":["10.0.0.5","fd00:0::5"]}]`}},
		{name: "prefix lengths, zones, mapped addresses and junk", wantPresent: true, want: []string{"10.0.0.5", "fe80::1", "10.0.0.6"},
			annotations: map[string]string{nadv1.NetworkStatusAnnot: `[{"name":"n","ips":["10.0.0.5/24"," fe80::1%net1 ","::ffff:10.0.0.6","not-an-ip",""]}]`}},
		{name: "empty list", wantPresent: true, annotations: map[string]string{nadv1.NetworkStatusAnnot: `[]`}},
		{name: "not JSON", wantPresent: true, wantErr: "annotation k8s.v1.cni.cncf.io/network-status of pod ns/p is not a list of network statuses",
			annotations: map[string]string{nadv1.NetworkStatusAnnot: `{"ips":`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: tt.annotations}}
			got, present, err := NetworkStatusAddrs(pod)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if present != tt.wantPresent {
				t.Fatalf("present = %v, want %v", present, tt.wantPresent)
			}
			var want []netip.Addr
			for _, w := range tt.want {
				want = append(want, netip.MustParseAddr(w))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("addresses %v, want %v", got, want)
			}
		})
	}
}
