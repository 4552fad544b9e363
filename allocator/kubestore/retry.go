package kubestore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/ipam"
)

// attemptTimeout bounds one API request, so a hung connection costs one attempt, not the whole
// bound of the call.
const attemptTimeout = 3 * time.Second

// transient reports whether a failed API call may succeed if retried: the API server was
// unreachable, overloaded, restarting, or timed out. Definite answers (AlreadyExists, NotFound,
// Invalid, Forbidden, ...) are not transient.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // no answer from the server: connection refused or reset, timeout, EOF
	}
	st := status.Status()
	return st.Code == http.StatusTooManyRequests || st.Code >= http.StatusInternalServerError ||
		apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || notServed(st)
}

// notServed reports a 404 about the kind rather than an object: a restarting API server answers so
// until it serves the CRDs again.
func notServed(st metav1.Status) bool {
	return st.Code == http.StatusNotFound && (st.Details == nil || st.Details.Name == "")
}

// maybeApplied reports whether a write that failed with err may nevertheless have taken effect: the
// request may have reached etcd although no answer came back. A 429 is refused before any work.
func maybeApplied(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	code := status.Status().Code
	return transient(err) && code != http.StatusTooManyRequests && code != http.StatusNotFound
}

// retry runs op until it succeeds, fails for good, or ctx ends. Each attempt gets at most
// attemptTimeout. The error after the last attempt wraps allocator.ErrStoreBusy (CNI error 11)
// and names what was being done, so the runtime retries the whole CNI call later.
func (s *Store) retry(ctx context.Context, what string, op func(context.Context) error) error {
	wait := s.opts.RetryInterval
	start := time.Now()
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := op(actx)
		cancel()
		if err == nil || !s.retryable(err) {
			return err
		}
		dl, ok := ctx.Deadline()
		if ctx.Err() != nil || (ok && time.Until(dl) < wait) {
			return fmt.Errorf("%w: failed to %s: the API server did not answer after %d attempts in %v: %w",
				allocator.ErrStoreBusy, what, attempt, time.Since(start).Round(time.Millisecond), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// apiFailure is the error of an API call that retry gave up on: ErrStoreBusy as it is, a definite
// failure through permanent.
func apiFailure(what string, err error) error {
	if errors.Is(err, allocator.ErrStoreBusy) {
		return err
	}
	return permanent(what, err)
}

// permanent wraps a definite API failure so the CNI boundary gives it a code: a rejected object is
// bad input (7), anything else makes the store unusable for now (105).
func permanent(what string, err error) error {
	if refusedByClient(err) {
		return fmt.Errorf("%w: the client refused to send the request to %s: %w", ipam.ErrInvalidConfig, what, err)
	}
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return fmt.Errorf("%w: the API server rejected %s: %w", ipam.ErrInvalidConfig, what, err)
	}
	return fmt.Errorf("%w: failed to %s: %w", allocator.ErrStoreUnusable, what, err)
}
