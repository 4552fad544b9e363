package nad

import (
	"context"
	"fmt"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// The NAD reconciler's decisions and error paths, over a fake client.

func TestNADReconcile(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "red"}}}
	gr := schema.GroupResource{Group: ipamv1.GroupName, Resource: "ippools"}
	inline := ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","network_name":"blue","range":"10.0.0.0/24"}`)
	ref := func(pool string) string {
		return ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","network_name":"blue","pool":"` + pool + `"}`)
	}
	pool := func(name, cidr, network string, selector map[string]string) *ipamv1.IPPool {
		p := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ipamv1.IPPoolSpec{Range: cidr, NetworkName: network}}
		if selector != nil {
			p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: selector}
		}
		return p
	}
	badSelector := pool("shared", "10.1.0.0/24", "blue", nil)
	badSelector.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Sideways"}}}
	var odd []string // 300 single addresses: more exclude entries than an IPPool holds
	for i := range 300 {
		odd = append(odd, fmt.Sprintf(`"10.2.%d.%d"`, i/100, 2*(i%100)+1))
	}
	tooManyExclusions := ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","range":"10.2.0.0/16","exclude":[` + strings.Join(odd, ",") + `]}`)
	var sections []string // 17 inline ranges over two sections
	for i := range 17 {
		sections = append(sections, fmt.Sprintf(`{"range":"10.3.%d.0/24"}`, i))
	}
	manyRanges := ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","range":"10.4.0.0/24","ipRanges":[` + strings.Join(sections[1:], ",") + `]}`)
	inlineNoOverlap := ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","network_name":"blue","range":"10.0.0.0/24","enable_overlapping_ranges":false}`)
	refNoOverlap := ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","network_name":"blue","pool":"shared","enable_overlapping_ranges":false}`)
	inlineCooldown := ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","network_name":"blue","range":"10.0.0.0/24","reuseCooldown":"1h"}`)
	refCooldown := ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","network_name":"blue","pool":"shared","reuseCooldown":"1h"}`)
	inlineSticky := ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","network_name":"blue","range":"10.0.0.0/24","statefulSets":"Sticky"}`)
	refSticky := ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","network_name":"blue","pool":"shared","statefulSets":"Sticky"}`)
	invalidPool := pool("shared", "10.1.0.0/24", "blue", nil)
	invalidPool.Status.Conditions = []metav1.Condition{{Type: ipamv1.IPPoolReadyCondition, Status: metav1.ConditionFalse,
		Reason: ipamv1.IPPoolInvalidSpecReason, Message: "no usable address", LastTransitionTime: metav1.Now()}}
	failList := func(kind string) interceptor.Funcs {
		return interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if strings.HasSuffix(ctrltest.TypeName(list), "."+kind) {
				return ctrltest.ErrExpected
			}
			return c.List(ctx, list, opts...)
		}}
	}
	failGet := func(kind string) interceptor.Funcs {
		return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if strings.HasSuffix(ctrltest.TypeName(obj), "."+kind) {
				return ctrltest.ErrExpected
			}
			return c.Get(ctx, key, obj, opts...)
		}}
	}
	failCreate := func(err error) interceptor.Funcs {
		return interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return err }}
	}
	tests := []struct {
		name       string
		nad        *nadv1.NetworkAttachmentDefinition
		objs       []client.Object
		funcs      interceptor.Funcs
		wantErr    string
		wantEvent  string // "Type Reason: note part"
		wantPool   string // a pool that must exist afterwards
		wantNoPool bool
		// wantMode is wantPool's recorded spec.overlappingRanges.
		wantMode ipamv1.OverlappingRanges
		// wantCooldown is wantPool's recorded spec.reuseCooldown.
		wantCooldown string
		// wantNoDerived: no derived pool exists afterwards (operators' pools may).
		wantNoDerived bool
	}{
		{name: "no NAD"},
		{name: "the NAD cannot be read", nad: ctrltest.TestNAD(inline), funcs: failGet("NetworkAttachmentDefinition"),
			wantErr: "failed to get NetworkAttachmentDefinition ns/net: injected failure"},
		{name: "no netpool IPAM", nad: ctrltest.TestNAD(`{"cniVersion":"1.0.0","name":"x","type":"bridge","ipam":{"type":"host-local"}}`), wantNoPool: true},
		{name: "a bad config", nad: ctrltest.TestNAD(ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24","gateway":"10.9.9.9"}`)),
			wantEvent: `Warning InvalidIPAMConfig: spec.config: plugins[0].ipam: invalid IPAM config: gateway "10.9.9.9": is not inside any range`, wantNoPool: true},
		{name: "the namespace cannot be read", nad: ctrltest.TestNAD(inline), objs: []client.Object{ns}, funcs: failGet("Namespace"),
			wantErr: "failed to get namespace ns: injected failure"},
		{name: "an inline range creates its pool", nad: ctrltest.TestNAD(inline), objs: []client.Object{ns},
			wantEvent: "Normal PoolCreated: Created IPPool blue-10.0.0.0-24 for range 0 (10.0.0.0/24) of plugins[0].ipam", wantPool: "blue-10.0.0.0-24"},
		{name: "an inline range in a namespace the cache has not seen", nad: ctrltest.TestNAD(inline), wantPool: "blue-10.0.0.0-24",
			wantEvent: "Normal PoolCreated: Created IPPool blue-10.0.0.0-24"},
		{name: "the pool exists", nad: ctrltest.TestNAD(inline), objs: []client.Object{ns, pool("blue-10.0.0.0-24", "10.0.0.0/24", "blue", nil)}},
		{name: "the pool cannot be read", nad: ctrltest.TestNAD(inline), funcs: failGet("IPPool"), wantErr: "failed to get IPPool blue-10.0.0.0-24: injected failure"},
		{name: "the pool name is taken by another range", nad: ctrltest.TestNAD(inline),
			objs:      []client.Object{pool("blue-10.0.0.0-24", "10.0.0.0/25", "blue", nil)},
			wantEvent: `Warning PoolUnusable: spec.config plugins[0].ipam: range 10.0.0.0/24 of network "blue": IPPool blue-10.0.0.0-24 already exists for range 10.0.0.0/25 of network "blue"`},
		{name: "the derived pool does not admit the namespace", nad: ctrltest.TestNAD(inline),
			objs:      []client.Object{ns, pool("blue-10.0.0.0-24", "10.0.0.0/24", "blue", map[string]string{"team": "blue"})},
			wantEvent: `Warning PoolUnusable: spec.config plugins[0].ipam: IPPool blue-10.0.0.0-24 does not admit namespace ns: its namespaceSelector is "team=blue"`},
		{name: "another writer creates the pool first", nad: ctrltest.TestNAD(inline), funcs: failCreate(apierrors.NewAlreadyExists(gr, "x"))},
		{name: "the API server rejects the pool", nad: ctrltest.TestNAD(inline), funcs: failCreate(apierrors.NewInvalid(schema.GroupKind{Group: ipamv1.GroupName, Kind: "IPPool"}, "x", nil)),
			wantEvent: "Warning PoolUnusable: spec.config plugins[0].ipam: range 10.0.0.0/24: the API server rejects its IPPool"},
		{name: "the pool cannot be created", nad: ctrltest.TestNAD(inline), funcs: failCreate(ctrltest.ErrExpected),
			wantErr: "failed to create IPPool blue-10.0.0.0-24: injected failure"},
		{name: "exclusions beyond what a pool holds", nad: ctrltest.TestNAD(tooManyExclusions), wantNoPool: true,
			wantEvent: "Warning InvalidIPAMConfig: spec.config: plugins[0].ipam: invalid IPAM config: ipam.exclude: the exclusions make more than 256 CIDRs once merged and clipped to the window 10.2.0.1-10.2.255.254; at most 256 are allowed"},
		{name: "more inline ranges than one NAD may derive", nad: ctrltest.TestNAD(manyRanges), objs: []client.Object{ns}, wantNoPool: true,
			wantEvent: "Warning PoolUnusable: spec.config: 17 inline ranges would derive as many IPPools; one NAD may derive at most 16; no pool is created until it is fixed"},
		{name: "enable_overlapping_ranges disagrees with the derived pool", nad: ctrltest.TestNAD(inlineNoOverlap),
			objs:      []client.Object{ns, pool("blue-10.0.0.0-24", "10.0.0.0/24", "blue", nil)},
			wantEvent: `Warning PoolUnusable: spec.config plugins[0].ipam: enable_overlapping_ranges false disagrees with IPPool blue-10.0.0.0-24, which records overlappingRanges Enabled`},
		{name: "enable_overlapping_ranges false is recorded on the pool it creates", nad: ctrltest.TestNAD(inlineNoOverlap), objs: []client.Object{ns},
			wantEvent: "Normal PoolCreated: Created IPPool blue-10.0.0.0-24", wantPool: "blue-10.0.0.0-24", wantMode: ipamv1.OverlappingRangesDisabled},
		{name: "reuseCooldown disagrees with the derived pool", nad: ctrltest.TestNAD(inlineCooldown),
			objs:      []client.Object{ns, pool("blue-10.0.0.0-24", "10.0.0.0/24", "blue", nil)},
			wantEvent: `Warning PoolUnusable: spec.config plugins[0].ipam: reuseCooldown 1h0m0s disagrees with IPPool blue-10.0.0.0-24, which records reuseCooldown 0s (none)`},
		{name: "reuseCooldown is recorded on the pool it creates", nad: ctrltest.TestNAD(inlineCooldown), objs: []client.Object{ns},
			wantEvent: "Normal PoolCreated: Created IPPool blue-10.0.0.0-24", wantPool: "blue-10.0.0.0-24", wantCooldown: "1h0m0s"},
		{name: "a reference whose reuseCooldown disagrees", nad: ctrltest.TestNAD(refCooldown), objs: []client.Object{ns, pool("shared", "10.1.0.0/24", "blue", nil)},
			wantEvent: "Warning PoolUnusable: spec.config plugins[0].ipam: reuseCooldown 1h0m0s disagrees with IPPool shared"},
		{name: "statefulSets disagrees with the derived pool", nad: ctrltest.TestNAD(inlineSticky),
			objs:      []client.Object{ns, pool("blue-10.0.0.0-24", "10.0.0.0/24", "blue", nil)},
			wantEvent: `Warning PoolUnusable: spec.config plugins[0].ipam: statefulSets Sticky disagrees with IPPool blue-10.0.0.0-24, which records statefulSets None`},
		{name: "a reference whose statefulSets disagrees", nad: ctrltest.TestNAD(refSticky), objs: []client.Object{ns, pool("shared", "10.1.0.0/24", "blue", nil)},
			wantEvent: "Warning PoolUnusable: spec.config plugins[0].ipam: statefulSets Sticky disagrees with IPPool shared"},
		{name: "an inline range over an operator's pool that does not admit the namespace", nad: ctrltest.TestNAD(inline), wantNoDerived: true,
			objs:      []client.Object{ns, pool("tenant-b-pool", "10.0.0.0/28", "blue", map[string]string{"team": "b"})},
			wantEvent: `Warning PoolUnusable: spec.config plugins[0].ipam: IPPool blue-10.0.0.0-24 cannot serve: spec.range "10.0.0.0/24": the window 10.0.0.1-10.0.0.254 overlaps IPPool tenant-b-pool (10.0.0.1-10.0.0.14, an operator's pool) of network "blue"`},
		{name: "the pools of the network cannot be listed", nad: ctrltest.TestNAD(inline), objs: []client.Object{ns}, funcs: failList("IPPoolList"),
			wantErr: `failed to list the IPPools of network "blue": injected failure`},
		{name: "a reference to a pool the controller found invalid", nad: ctrltest.TestNAD(ref("shared")), objs: []client.Object{ns, invalidPool},
			wantEvent: "Warning PoolUnusable: spec.config plugins[0].ipam: IPPool shared is not Ready (InvalidSpec): no usable address"},
		{name: "a reference whose enable_overlapping_ranges disagrees", nad: ctrltest.TestNAD(refNoOverlap), objs: []client.Object{ns, pool("shared", "10.1.0.0/24", "blue", nil)},
			wantEvent: "Warning PoolUnusable: spec.config plugins[0].ipam: enable_overlapping_ranges false disagrees with IPPool shared"},
		{name: "a reference to a missing pool", nad: ctrltest.TestNAD(ref("nowhere")),
			wantEvent: `Warning PoolUnusable: spec.config plugins[0].ipam: pool "nowhere": no IPPool of that name`},
		{name: "a reference that cannot be read", nad: ctrltest.TestNAD(ref("shared")), funcs: failGet("IPPool"),
			wantErr: "failed to get IPPool shared: injected failure"},
		{name: "a reference to a pool of another network", nad: ctrltest.TestNAD(ref("shared")), objs: []client.Object{pool("shared", "10.1.0.0/24", "red", nil)},
			wantEvent: `Warning PoolUnusable: spec.config plugins[0].ipam: network_name "blue": differs from the networkName "red" of IPPool shared`},
		{name: "a reference to a pool that admits the namespace", nad: ctrltest.TestNAD(ref("shared")),
			objs: []client.Object{ns, pool("shared", "10.1.0.0/24", "blue", map[string]string{"team": "red"})}},
		{name: "a reference to a pool with an invalid selector", nad: ctrltest.TestNAD(ref("shared")), objs: []client.Object{ns, badSelector},
			wantEvent: "Warning PoolUnusable: spec.config plugins[0].ipam: IPPool shared has an invalid namespaceSelector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := tt.objs
			if tt.nad != nil {
				objs = append(objs, tt.nad)
			}
			base := ctrltest.FakeClient(t, interceptor.Funcs{}, objs...)
			rec := &ctrltest.FakeRecorder{}
			r := &Reconciler{Client: interceptor.NewClient(base, tt.funcs), Recorder: rec}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "net"}})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			var got []string
			for _, e := range rec.All() {
				got = append(got, e.EventType+" "+e.Reason+": "+e.Note)
			}
			switch {
			case tt.wantEvent == "" && len(got) != 0:
				t.Fatalf("events %q, want none", got)
			case tt.wantEvent != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tt.wantEvent)):
				t.Fatalf("events %q, want one starting %q", got, tt.wantEvent)
			}
			var pools ipamv1.IPPoolList
			if err := base.List(context.Background(), &pools); err != nil {
				t.Fatal(err)
			}
			if tt.wantNoPool && len(pools.Items) != 0 {
				t.Fatalf("pools %v, want none", pools.Items)
			}
			if tt.wantPool != "" {
				got := &ipamv1.IPPool{}
				if err := base.Get(context.Background(), client.ObjectKey{Name: tt.wantPool}, got); err != nil {
					t.Fatalf("pool %s: %v", tt.wantPool, err)
				}
				if got.Spec.ReuseCooldown != tt.wantCooldown {
					t.Fatalf("pool %s: reuseCooldown %q, want %q", tt.wantPool, got.Spec.ReuseCooldown, tt.wantCooldown)
				}
				if got.Spec.OverlappingRanges != tt.wantMode || got.Labels[ipamv1.DerivedLabel] != ipamv1.DerivedLabelValue {
					t.Fatalf("pool %s: overlappingRanges %q, labels %v; want %q and the derived label", tt.wantPool, got.Spec.OverlappingRanges, got.Labels, tt.wantMode)
				}
			}
			for _, p := range pools.Items {
				if tt.wantNoDerived && p.Labels[ipamv1.DerivedLabel] != "" {
					t.Fatalf("derived pool %s was created", p.Name)
				}
			}
		})
	}
}

func TestNADsOfPoolAndNamespace(t *testing.T) {
	a := ctrltest.TestNAD(ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","pool":"shared"}`))
	b := ctrltest.TestNAD(ctrltest.Conflist(`{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24"}`))
	b.Name = "inline"
	other := ctrltest.TestNAD(`{"cniVersion":"1.0.0","name":"x","type":"bridge"}`)
	other.Namespace, other.Name = "elsewhere", "plain"
	r := &Reconciler{Client: ctrltest.FakeClient(t, interceptor.Funcs{}, a, b, other)}
	ctx := context.Background()
	if got := ctrltest.RequestNames(r.nadsOfPool(ctx, &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "shared"}})); got != "net" {
		t.Fatalf("NADs of pool shared: %q", got)
	}
	if got := ctrltest.RequestNames(r.nadsOfPool(ctx, &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.0-24"}})); got != "inline" {
		t.Fatalf("NADs of pool 10.0.0.0-24: %q", got)
	}
	if got := ctrltest.RequestNames(r.nadsOfNamespace(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}})); got != "inline net" {
		t.Fatalf("NADs of namespace ns: %q", got)
	}
	failing := &Reconciler{Client: ctrltest.FakeClient(t, interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return ctrltest.ErrExpected
	}})}
	if got := failing.nadsOfNamespace(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}); got != nil {
		t.Fatalf("requests %v after a list error", got)
	}
	if err := (&Reconciler{}).SetupWithManager(nil); err == nil {
		t.Fatal("SetupWithManager without a client succeeded")
	}
}
