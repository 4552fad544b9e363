package kubestore

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestForbiddenRetriedOnlyWhileWarmingUp: a 403 is retried (and ends as 11) only within
// rbacWarmup of the API server being unreachable; otherwise it is a definite denial.
func TestForbiddenRetriedOnlyWhileWarmingUp(t *testing.T) {
	gr := schema.GroupResource{Group: "ipam.netpool.io", Resource: "overlappingrangeipreservations"}
	forbidden := apierrors.NewForbidden(gr, "x", errors.New("cannot create"))
	s := &Store{reach: &reachability{}}
	if s.retryable(forbidden) {
		t.Error("a 403 with no outage seen is retried")
	}
	if !s.retryable(errors.New("dial tcp: connect: connection refused")) {
		t.Error("no answer is not retried")
	}
	if !s.retryable(forbidden) {
		t.Error("a 403 right after the API server was unreachable is not retried")
	}
	s.reach.last.Store(time.Now().Add(-rbacWarmup - time.Second).UnixNano())
	if s.retryable(forbidden) {
		t.Errorf("a 403 %v after the outage is still retried", rbacWarmup)
	}
	if maybeApplied(forbidden) {
		t.Error("a denied write is taken as maybe applied")
	}
}

// TestTransportWrapperSeesUnreachable: every request through the store's transport that gets no
// answer marks the API server unreachable; an answer, or a request its caller cancelled, does not.
func TestTransportWrapperSeesUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	defer srv.Close()
	r := &reachability{}
	rt := r.wrap(http.DefaultTransport)
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if r.warmingUp() {
		t.Fatal("an answered request marked the API server unreachable")
	}
	srv.Close()
	req, _ = http.NewRequest(http.MethodGet, srv.URL, nil)
	if _, err := rt.RoundTrip(req); err == nil {
		t.Fatal("a request to a closed server succeeded")
	}
	if !r.warmingUp() {
		t.Fatal("a refused connection did not mark the API server unreachable")
	}
}
