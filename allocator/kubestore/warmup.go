package kubestore

import (
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// rbacWarmup is how long after the API server was last unreachable a 403 is taken for "not yet":
// a restarted kube-apiserver answers requests before its authorizer has read the roles and
// bindings, and denies the agent what its RBAC allows for the first seconds. Outside the window a
// 403 is what it says, a permanent denial (105), so a real RBAC mistake is not retried for ever.
const rbacWarmup = 30 * time.Second

// reachability remembers when the API server last failed to answer, from every request the
// store's clients make (informer watches included), so a call that starts after the restart knows
// of it too.
type reachability struct {
	last atomic.Int64 // unix nanoseconds; 0: never
}

func (r *reachability) saw() { r.last.Store(time.Now().UnixNano()) }

// warmingUp reports whether the API server was unreachable within rbacWarmup.
func (r *reachability) warmingUp() bool {
	last := r.last.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < rbacWarmup
}

// wrap is a rest.Config transport wrapper: a request that got no answer, and was not cancelled
// by its caller, marks the API server unreachable.
func (r *reachability) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil && req.Context().Err() == nil {
			r.saw()
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// retryable reports whether retry should try op again after err: a transient failure, or a 403
// while the API server warms up after an outage.
func (s *Store) retryable(err error) bool {
	if refusedByClient(err) {
		return false // never sent: no answer to wait for
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		s.reach.saw() // no answer at all
		return true
	}
	return transient(err) || (apierrors.IsForbidden(err) && s.reach.warmingUp())
}
