package kubestore

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/internal/scheme"
	"github.com/netpool/netpool/ipam"
)

// TestRefusedByClient makes the real client refuse requests before sending them (names that a
// claim reference or CNI_ARGS may carry), against an address where nothing listens, so that a
// request that were sent would fail as "no answer" instead. Each refusal is permanent: the store's
// retry returns it at once, and it counts as invalid input (7), not, after the whole bound, as
// "try again" (11).
func TestRefusedByClient(t *testing.T) {
	kinds, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(&rest.Config{Host: "http://127.0.0.1:1"}, client.Options{Scheme: kinds, Mapper: restMapper()})
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{reach: &reachability{}, opts: Options{RetryInterval: 10 * time.Millisecond}}
	for _, tt := range []struct {
		name string
		key  client.ObjectKey
		obj  client.Object
	}{
		{"a claim reference with a namespace", client.ObjectKey{Namespace: "team-a", Name: "team-b/vmx.net1"}, &ipamclaimsv1.IPAMClaim{}},
		{"a pod name of dots", client.ObjectKey{Namespace: "team-a", Name: ".."}, &corev1.Pod{}},
		{"a namespace with a slash", client.ObjectKey{Namespace: "a/b", Name: "p"}, &corev1.Pod{}},
		{"an empty name", client.ObjectKey{Namespace: "team-a"}, &corev1.Pod{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			err := s.retry(ctx, "read "+tt.key.String(), func(ctx context.Context) error { return c.Get(ctx, tt.key, tt.obj) })
			if !refusedByClient(err) {
				t.Fatalf("Get %s: %v (%T), want the client's refusal", tt.key, err, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("the refusal was retried for %v", d)
			}
			if f := apiFailure("read "+tt.key.String(), err); !errors.Is(f, ipam.ErrInvalidConfig) || errors.Is(f, allocator.ErrStoreBusy) {
				t.Fatalf("apiFailure = %v, want invalid input", f)
			}
		})
	}
	// A request that is sent and gets no answer is not a refusal: it is retried.
	err = c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "vmx.net1"}, &ipamclaimsv1.IPAMClaim{})
	var sent *url.Error
	if !errors.As(err, &sent) || refusedByClient(err) || !s.retryable(err) {
		t.Fatalf("a Get that found nobody listening: %v (%T), refused %v; want a transport error, retried", err, err, refusedByClient(err))
	}
}
