// Package release deletes what the controller reclaims (leaked reservations, slices given back)
// and reports each as an Event, a metric and a log line: the one path of the GC, the node reclaim
// and the slice return.
package release

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/netpool/netpool/controller/internal/metrics"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/gcpolicy"
	"github.com/netpool/netpool/internal/kubeclient/crclient"
)

// Event reasons of releases, on the pod (else its pool) and on the pool.
const (
	// EventAddressReleased (Warning): GC released a leaked reservation; the note names the address,
	// the pool, the attachment and the release reason.
	EventAddressReleased = "AddressReleased"
	// EventLeakFound (Warning): a dry run found a leaked reservation and left it.
	EventLeakFound = "LeakFound"
	// EventSliceReturned (Normal), on the pool: a slice went back to the pool.
	EventSliceReturned = "SliceReturned"
)

// Event actions (events.k8s.io/v1 requires one).
const (
	actionRelease = "Release"
	actionReturn  = "Return"
)

// Releaser deletes leaked reservations, and reports each release as an Event, a metric and a log
// line. In a dry run it reports each leak once and deletes nothing.
type Releaser struct {
	// Client deletes, and reads the pool an Event goes to.
	Client client.Client
	// Recorder records the Events.
	Recorder events.EventRecorder
	// Metrics counts releases and returned slices.
	Metrics *metrics.Metrics
	// DryRun reports leaks without releasing them.
	DryRun bool

	mu sync.Mutex
	// reported holds the reservations a dry run has reported, so a sweep does not report them again.
	reported map[types.UID]bool
}

// Release releases r for reason (detail says why). pod is r's pod when it exists: the Event goes
// there, else to r's pool. The delete is conditional on r's UID, so a reservation of the same name
// made since (the address claimed anew) is never touched; a reservation already gone is no error.
func (rl *Releaser) Release(ctx context.Context, r *ipamv1.OverlappingRangeIPReservation, reason, detail string, pod *corev1.Pod) error {
	log := logf.FromContext(ctx).WithValues("reservation", r.Name, "address", r.Spec.Address, "pool", r.Spec.Pool,
		"podRef", r.Spec.PodRef, "reason", reason)
	if rl.DryRun {
		if !rl.firstReport(r.UID) {
			return nil
		}
		log.Info("Found a leaked reservation, keeping it (dry run)", "detail", detail)
		rl.Metrics.Released(reason, true)
		rl.Recorder.Eventf(rl.regarding(ctx, r, pod), r, corev1.EventTypeWarning, EventLeakFound, actionRelease,
			"Dry run: would release %s of IPPool %s (reservation %s, container %s, interface %s): %s",
			r.Spec.Address, r.Spec.Pool, r.Name, r.Spec.ContainerID, r.Spec.IfName, detail)
		return nil
	}
	log.Info("Releasing a leaked reservation", "detail", detail)
	released, err := gcpolicy.Delete(ctx, crclient.Writer(rl.Client), r)
	if err != nil || !released {
		return err
	}
	rl.Metrics.Released(reason, false)
	rl.Recorder.Eventf(rl.regarding(ctx, r, pod), r, corev1.EventTypeWarning, EventAddressReleased, actionRelease,
		"Released %s of IPPool %s (reservation %s, container %s, interface %s): %s",
		r.Spec.Address, r.Spec.Pool, r.Name, r.Spec.ContainerID, r.Spec.IfName, detail)
	return nil
}

// Prune removes stale users, whose pods are gone, from r, a persistently owned reservation read
// live (gcpolicy.Prune: an update conditional on what was read). A dry run reports them once and
// changes nothing. It reports whether r changed.
func (rl *Releaser) Prune(ctx context.Context, r *ipamv1.OverlappingRangeIPReservation, stale []gcpolicy.StaleUser) (bool, error) {
	why := make([]string, len(stale))
	for i, s := range stale {
		why[i] = s.User.ContainerID + "/" + s.User.IfName + " on node " + s.User.Node + ": " + s.Why
	}
	log := logf.FromContext(ctx).WithValues("reservation", r.Name, "address", r.Spec.Address, "users", why)
	if rl.DryRun {
		if rl.firstReport(types.UID(string(r.UID) + "/" + r.ResourceVersion)) {
			log.Info("Found users whose pods are gone, keeping them (dry run)")
		}
		return false, nil
	}
	pruned, err := gcpolicy.Prune(ctx, crclient.Writer(rl.Client), r, stale)
	if err == nil && pruned {
		rl.Metrics.UsersRemoved.Add(float64(len(stale)))
		log.Info("Removed the users whose pods are gone from a persistently owned reservation")
	}
	return pruned, err
}

// ReturnSlice gives slice s back to its pool for reason (detail says why): the delete is
// conditional on its UID, so a block claimed anew under the same name is never touched. The Event
// goes to the pool, else to the slice.
func (rl *Releaser) ReturnSlice(ctx context.Context, s *ipamv1.IPPoolSlice, reason, detail string) error {
	log := logf.FromContext(ctx).WithValues("slice", s.Name, "range", s.Spec.Range, "pool", s.Spec.Pool,
		"node", s.Spec.Node, "reason", reason)
	if rl.DryRun {
		if rl.firstReport(s.UID) {
			log.Info("Found a slice to give back, keeping it (dry run)", "detail", detail)
		}
		return nil
	}
	log.Info("Giving a slice back to its pool", "detail", detail)
	uid := s.UID
	err := rl.Client.Delete(ctx, s, client.Preconditions{UID: &uid})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil // given back already, or claimed anew
	case err != nil:
		return fmt.Errorf("failed to give slice %s (%s of IPPool %s) back: %w", s.Name, s.Spec.Range, s.Spec.Pool, err)
	}
	rl.Metrics.SlicesReturned.WithLabelValues(reason).Inc()
	var regarding runtime.Object = s
	pool := &ipamv1.IPPool{}
	if err := rl.Client.Get(ctx, client.ObjectKey{Name: s.Spec.Pool}, pool); err == nil {
		regarding = pool
	}
	rl.Recorder.Eventf(regarding, s, corev1.EventTypeNormal, EventSliceReturned, actionReturn,
		"Slice %s (%s) of node %s went back to IPPool %s: %s", s.Name, s.Spec.Range, s.Spec.Node, s.Spec.Pool, detail)
	return nil
}

// regarding is the object a release Event is about: the pod when it exists, else the pool, else
// (the pool is gone too) the reservation itself.
func (rl *Releaser) regarding(ctx context.Context, r *ipamv1.OverlappingRangeIPReservation, pod *corev1.Pod) runtime.Object {
	if pod != nil {
		return pod
	}
	pool := &ipamv1.IPPool{}
	if err := rl.Client.Get(ctx, client.ObjectKey{Name: r.Spec.Pool}, pool); err == nil {
		return pool
	}
	// Whatever failed (mostly: the pool is gone), the Event still names the pool in its note.
	return r
}

// firstReport records that a dry run reported uid, and says whether it had not before.
func (rl *Releaser) firstReport(uid types.UID) bool {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.reported == nil {
		rl.reported = map[types.UID]bool{}
	}
	if rl.reported[uid] {
		return false
	}
	rl.reported[uid] = true
	return true
}
