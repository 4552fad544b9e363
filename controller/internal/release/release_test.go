package release_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/release"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/gcpolicy"
)

func TestReleaseDeletesReportsAndCounts(t *testing.T) {
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "pool-uid"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	tests := []struct {
		name          string
		objs          []*ipamv1.IPPool
		pod           *corev1.Pod
		wantRegarding string
	}{
		{name: "the Event goes to the pod", objs: []*ipamv1.IPPool{pool}, pod: pod, wantRegarding: "*v1.Pod"},
		{name: "without a pod, to the pool", objs: []*ipamv1.IPPool{pool}, wantRegarding: "*v1alpha1.IPPool"},
		{name: "without a pool, to the reservation", wantRegarding: "*v1alpha1.OverlappingRangeIPReservation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := ctrltest.NewReservation("p", "10.0.0.5", pod, "n")
			res.UID = "res-uid"
			objs := []client.Object{res}
			for _, p := range tt.objs {
				objs = append(objs, p.DeepCopy())
			}
			c := ctrltest.FakeClient(t, interceptor.Funcs{}, objs...)
			rec, m := &ctrltest.FakeRecorder{}, ctrltest.MustMetrics(t)
			rl := &release.Releaser{Client: c, Recorder: rec, Metrics: m}
			if err := rl.Release(context.Background(), res, gcpolicy.ReasonPodDeleted, "pod ns/web no longer exists", tt.pod); err != nil {
				t.Fatal(err)
			}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(res), res.DeepCopy()); !apierrors.IsNotFound(err) {
				t.Fatalf("the reservation still exists: %v", err)
			}
			evs := rec.All()
			if len(evs) != 1 || ctrltest.TypeName(evs[0].Regarding) != tt.wantRegarding || evs[0].Reason != release.EventAddressReleased ||
				evs[0].EventType != corev1.EventTypeWarning {
				t.Fatalf("events %+v, want one %s Warning about a %s", evs, release.EventAddressReleased, tt.wantRegarding)
			}
			const wantNote = "Released 10.0.0.5 of IPPool p (reservation p.10.0.0.5, container c10005, interface net1): pod ns/web no longer exists"
			if evs[0].Note != wantNote {
				t.Fatalf("note %q, want %q", evs[0].Note, wantNote)
			}
			if got := ctrltest.Value(t, m.Releases.WithLabelValues(gcpolicy.ReasonPodDeleted, "false")); got != 1 {
				t.Fatalf("releases = %v, want 1", got)
			}
		})
	}
}

func TestReleaseFailures(t *testing.T) {
	gr := schema.GroupResource{Group: ipamv1.GroupName, Resource: "overlappingrangeipreservations"}
	tests := []struct {
		name    string
		err     error
		wantErr string
	}{
		{name: "already released", err: apierrors.NewNotFound(gr, "x")},
		{name: "claimed anew under the same name", err: apierrors.NewConflict(gr, "x", ctrltest.ErrExpected)},
		{name: "the API server fails", err: ctrltest.ErrExpected, wantErr: "failed to release reservation p.10.0.0.5 (10.0.0.5 of IPPool p): injected failure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := ctrltest.NewReservation("p", "10.0.0.5", nil, "n")
			c := ctrltest.FakeClient(t, interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
				return tt.err
			}}, res)
			rec, m := &ctrltest.FakeRecorder{}, ctrltest.MustMetrics(t)
			rl := &release.Releaser{Client: c, Recorder: rec, Metrics: m}
			err := rl.Release(context.Background(), res, gcpolicy.ReasonPodDeleted, "d", nil)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if len(rec.All()) != 0 || ctrltest.Series(m.Releases) != 0 {
				t.Fatalf("a release that did not happen was reported: %+v", rec.All())
			}
		})
	}
}

func TestReleaseIsConditionalOnTheUID(t *testing.T) {
	res := ctrltest.NewReservation("p", "10.0.0.5", nil, "n")
	res.UID = "old"
	var preconditions *metav1.Preconditions
	c := ctrltest.FakeClient(t, interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		o := &client.DeleteOptions{}
		o.ApplyOptions(opts)
		preconditions = o.Preconditions
		return c.Delete(ctx, obj, opts...)
	}}, res)
	rl := &release.Releaser{Client: c, Recorder: &ctrltest.FakeRecorder{}, Metrics: ctrltest.MustMetrics(t)}
	if err := rl.Release(context.Background(), res, gcpolicy.ReasonPodDeleted, "d", nil); err != nil {
		t.Fatal(err)
	}
	if preconditions == nil || preconditions.UID == nil || *preconditions.UID != "old" {
		t.Fatalf("delete preconditions %+v, want UID old", preconditions)
	}
}

func TestDryRunReportsEachLeakOnceAndDeletesNothing(t *testing.T) {
	res := ctrltest.NewReservation("p", "10.0.0.5", nil, "n")
	res.UID = "u"
	sl := &ipamv1.IPPoolSlice{ObjectMeta: metav1.ObjectMeta{Name: "p.0", UID: "s"}, Spec: ipamv1.IPPoolSliceSpec{Pool: "p", Range: "10.0.0.0/28", Node: "n"}}
	c := ctrltest.FakeClient(t, interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
		t.Error("a dry run deleted something")
		return nil
	}}, res, sl)
	rec, m := &ctrltest.FakeRecorder{}, ctrltest.MustMetrics(t)
	rl := &release.Releaser{Client: c, Recorder: rec, Metrics: m, DryRun: true}
	for range 3 {
		if err := rl.Release(context.Background(), res, gcpolicy.ReasonPodFinished, "pod ns/web has Succeeded", nil); err != nil {
			t.Fatal(err)
		}
		if err := rl.ReturnSlice(context.Background(), sl, gcpolicy.ReasonSliceEmpty, "idle"); err != nil {
			t.Fatal(err)
		}
	}
	evs := rec.All()
	if len(evs) != 1 || evs[0].Reason != release.EventLeakFound || !strings.HasPrefix(evs[0].Note, "Dry run: would release 10.0.0.5") {
		t.Fatalf("events %+v, want one %s", evs, release.EventLeakFound)
	}
	if got := ctrltest.Value(t, m.Releases.WithLabelValues(gcpolicy.ReasonPodFinished, "true")); got != 1 {
		t.Fatalf("dry-run releases = %v, want 1", got)
	}
	if n := ctrltest.Series(m.SlicesReturned); n != 0 {
		t.Fatalf("a dry run counted %d returned slices", n)
	}
}

func TestReturnSlice(t *testing.T) {
	gr := schema.GroupResource{Group: ipamv1.GroupName, Resource: "ippoolslices"}
	newSlice := func() *ipamv1.IPPoolSlice {
		return &ipamv1.IPPoolSlice{ObjectMeta: metav1.ObjectMeta{Name: "p.1", UID: "s"},
			Spec: ipamv1.IPPoolSliceSpec{Pool: "p", Range: "10.0.0.16/28", Node: "n"}}
	}
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	tests := []struct {
		name          string
		deleteErr     error
		withPool      bool
		wantErr       string
		wantRegarding string
	}{
		{name: "returned, Event on the pool", withPool: true, wantRegarding: "*v1alpha1.IPPool"},
		{name: "returned, the pool is gone: Event on the slice", wantRegarding: "*v1alpha1.IPPoolSlice"},
		{name: "returned already", deleteErr: apierrors.NewNotFound(gr, "p.1")},
		{name: "claimed anew", deleteErr: apierrors.NewConflict(gr, "p.1", ctrltest.ErrExpected)},
		{name: "the API server fails", deleteErr: ctrltest.ErrExpected, wantErr: "failed to give slice p.1 (10.0.0.16/28 of IPPool p) back: injected failure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []client.Object{newSlice()}
			if tt.withPool {
				objs = append(objs, pool.DeepCopy())
			}
			funcs := interceptor.Funcs{}
			if tt.deleteErr != nil {
				funcs.Delete = func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
					return tt.deleteErr
				}
			}
			rec, m := &ctrltest.FakeRecorder{}, ctrltest.MustMetrics(t)
			rl := &release.Releaser{Client: ctrltest.FakeClient(t, funcs, objs...), Recorder: rec, Metrics: m}
			err := rl.ReturnSlice(context.Background(), newSlice(), gcpolicy.ReasonSliceEmpty, "idle")
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			evs := rec.All()
			if tt.wantRegarding == "" {
				if len(evs) != 0 {
					t.Fatalf("events %+v, want none", evs)
				}
				return
			}
			if len(evs) != 1 || ctrltest.TypeName(evs[0].Regarding) != tt.wantRegarding || evs[0].Reason != release.EventSliceReturned ||
				evs[0].Note != "Slice p.1 (10.0.0.16/28) of node n went back to IPPool p: idle" {
				t.Fatalf("events %+v, want one %s about a %s", evs, release.EventSliceReturned, tt.wantRegarding)
			}
			if got := ctrltest.Value(t, m.SlicesReturned.WithLabelValues(gcpolicy.ReasonSliceEmpty)); got != 1 {
				t.Fatalf("slices returned = %v, want 1", got)
			}
		})
	}
}
