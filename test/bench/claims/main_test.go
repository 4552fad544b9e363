package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestVerbOf(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/vms/pods/virt-launcher-a":                               "GET pods",
		"/apis/k8s.cni.cncf.io/v1alpha1/namespaces/vms/ipamclaims/vm-a.net1/status": "GET ipamclaims/status",
		"/apis/k8s.cni.cncf.io/v1alpha1/namespaces/vms/ipamclaims/vm-a.net1":        "GET ipamclaims",
		"/apis/ipam.netpool.io/v1alpha1/overlappingrangeipreservations/10.92.0.5":   "GET overlappingrangeipreservations",
		"/apis/ipam.netpool.io/v1alpha1/overlappingrangeipreservations":             "GET overlappingrangeipreservations",
		"/api/v1/nodes/node-a": "GET nodes",
	} {
		if got := verbOf(httptest.NewRequest(http.MethodGet, path, nil)); got != want {
			t.Errorf("verbOf(%s) = %q, want %q", path, got, want)
		}
	}
}

// TestClaimCost runs the bench small on envtest: the counts are exact, so the target must hold
// (and fails if an ADD with a claim makes more requests than it should).
func TestClaimCost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	rows, err := run(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if !print(t.Output(), rows, 3) {
		t.Fatal("the target is missed")
	}
}
