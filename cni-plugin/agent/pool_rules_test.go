package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/cni-plugin/agentproto"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

// TestPoolRules drives the pool model's rules through the agent, as the plugin binary forwards
// calls: each subtest is a defect that handed out addresses a pool's rules forbid.
func TestPoolRules(t *testing.T) {
	env := envtest.Start(t)
	dir := socketDir(t)
	na := MustRun(t, env, "node-a", filepath.Join(dir, "a.sock"), Options{})
	nb := MustRun(t, env, "node-b", filepath.Join(dir, "b.sock"), Options{})
	sh := newShim()
	ctx := context.Background()
	create := func(t *testing.T, objs ...client.Object) {
		t.Helper()
		for _, o := range objs {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Two NADs share range 10.97.0.0/29 and network_name ovn; one sets enable_overlapping_ranges
	// false. Each names an address's reservation differently, so alternating ADDs used to get .1,
	// .1, .2, .2, ...: the pool records the first config's mode and refuses the other.
	t.Run("NADs sharing a pool with mixed enable_overlapping_ranges", func(t *testing.T) {
		shared := netConf("ovn-a", na.socket, `,"range":"10.97.0.0/29","network_name":"ovn"`)
		unshared := netConf("ovn-b", na.socket, `,"range":"10.97.0.0/29","network_name":"ovn","enable_overlapping_ranges":false`)
		held := map[string]string{}
		for i := range 3 {
			id := fmt.Sprintf("mix-a%d", i)
			ip := sh.addIP(t, id, shared)
			if prev, dup := held[ip]; dup {
				t.Fatalf("%s got %s, held by %s", id, ip, prev)
			}
			held[ip] = id
			_, err := sh.call("ADD", fmt.Sprintf("mix-b%d", i), "", unshared)
			wantCode(t, err, types.ErrInvalidNetworkConfig,
				`enable_overlapping_ranges false disagrees with IPPool ovn-10.97.0.0-29, which records overlappingRanges Enabled (enable_overlapping_ranges true)`)
		}
		pool := &ipamv1.IPPool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "ovn-10.97.0.0-29"}, pool); err != nil || pool.Spec.OverlappingRanges != "" {
			t.Fatalf("pool %+v, %v: want the default mode recorded (unset: Enabled)", pool.Spec, err)
		}
		// A refused config's DEL still succeeds: DEL must never fail for what was never given.
		if _, err := sh.call("DEL", "mix-b0", "", unshared); err != nil {
			t.Errorf("DEL with the refused config = %v", err)
		}

		// The other way round: the first config says false, so the pool is Disabled, and a
		// config relying on the default is refused.
		first := netConf("ovn-c", nb.socket, `,"range":"10.97.1.0/29","network_name":"ovn","enable_overlapping_ranges":false`)
		second := netConf("ovn-d", nb.socket, `,"range":"10.97.1.0/29","network_name":"ovn"`)
		if ip := sh.addIP(t, "mix-c0", first); ip != "10.97.1.1" {
			t.Fatalf("first ADD got %s", ip)
		}
		_, err := sh.call("ADD", "mix-d0", "", second)
		wantCode(t, err, types.ErrInvalidNetworkConfig,
			`enable_overlapping_ranges true (the default) disagrees with IPPool ovn-10.97.1.0-29, which records overlappingRanges Disabled`)
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "ovn-10.97.1.0-29"}, pool); err != nil || pool.Spec.OverlappingRanges != ipamv1.OverlappingRangesDisabled {
			t.Fatalf("pool %+v, %v: want overlappingRanges Disabled", pool.Spec, err)
		}
	})

	// IPPool tenant-b-pool admits only team b. A team-a NAD with the same range and network used
	// to derive its own pool in the same address scope and take every free address of team b's.
	t.Run("an inline NAD over a selector-restricted operator pool", func(t *testing.T) {
		create(t,
			&ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "tenant-b-pool"}, Spec: ipamv1.IPPoolSpec{Range: "10.95.0.0/28", NetworkName: "corp",
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a"}}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{"team": "b"}}},
		)
		inline := netConf("corp-a", na.socket, `,"range":"10.95.0.0/28","network_name":"corp"`)
		for i := range 14 {
			_, err := sh.call("ADD", fmt.Sprintf("team-a-%d", i), "K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=p", inline)
			wantCode(t, err, types.ErrInvalidNetworkConfig, `IPPool corp-10.95.0.0-28 overlaps IPPool tenant-b-pool (10.95.0.1-10.95.0.14), whose rules apply to its addresses too: IPPool tenant-b-pool does not admit namespace team-a`)
		}
		// Refused, the config changed nothing: no derived pool, no reservation.
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "corp-10.95.0.0-28"}, &ipamv1.IPPool{}); !apierrors.IsNotFound(err) {
			t.Errorf("the derived pool of a refused config: %v, want NotFound", err)
		}
		var held ipamv1.OverlappingRangeIPReservationList
		if err := env.Client.List(ctx, &held); err != nil {
			t.Fatal(err)
		}
		for _, r := range held.Items {
			if strings.HasPrefix(r.Spec.Address, "10.95.") {
				t.Errorf("reservation %s for %s after refused ADDs", r.Name, r.Spec.Address)
			}
		}
		ref := netConf("corp-b", nb.socket, `,"pool":"tenant-b-pool"`)
		out, err := sh.call("ADD", "team-b-0", "K8S_POD_NAMESPACE=team-b;K8S_POD_NAME=p", ref)
		if err != nil || firstIP(t, out) != "10.95.0.1" {
			t.Errorf("team b's ADD = %s, %v, want 10.95.0.1", out, err)
		}
		// Team b may use an inline NAD of the same range: it obeys the operator's pool.
		_, err = sh.call("ADD", "team-b-1", "K8S_POD_NAMESPACE=team-b;K8S_POD_NAME=q", netConf("corp-b2", nb.socket, `,"range":"10.95.0.0/28","network_name":"corp"`))
		if err != nil {
			t.Errorf("team b's inline ADD = %v", err)
		}
	})

	// A pool the controller marks not Ready hands out nothing, and the error names the reason.
	t.Run("a pool that is not Ready", func(t *testing.T) {
		pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ops-invalid"}, Spec: ipamv1.IPPoolSpec{Range: "10.96.0.0/24", NetworkName: "inv"}}
		create(t, pool)
		ref := netConf("inv", na.socket, `,"pool":"ops-invalid"`)
		if ip := sh.addIP(t, "inv-0", ref); ip != "10.96.0.1" {
			t.Fatalf("ADD while Ready got %s", ip)
		}
		setReady(t, env, pool, metav1.ConditionFalse, ipamv1.IPPoolInvalidSpecReason,
			`spec.range "10.96.0.0/24": the window 10.96.0.1-10.96.0.254 overlaps IPPool other (10.96.0.1-10.96.0.126) of network "inv"`)
		// Each attempt is a new attachment: one that got an address before the agent saw the
		// condition would get the same address again (ADD is idempotent).
		attempt := 0
		var err error
		poll.Eventually(t, 10*time.Second, "the agent refuses the pool that is not Ready", func() error {
			attempt++
			_, err = sh.call("ADD", fmt.Sprintf("inv-1-%d", attempt), "", ref)
			if codeOf(err) != types.ErrInvalidNetworkConfig {
				return fmt.Errorf("ADD: %v", err)
			}
			return nil
		})
		wantCode(t, err, types.ErrInvalidNetworkConfig,
			`IPPool ops-invalid is not Ready (InvalidSpec): spec.range "10.96.0.0/24": the window 10.96.0.1-10.96.0.254 overlaps IPPool other`)
		// What it gave is still released and checked.
		if _, err := sh.call("DEL", "inv-0", "", ref); err != nil {
			t.Errorf("DEL from a pool that is not Ready = %v", err)
		}
		// An exhausted pool is judged live by the allocator, not by the condition.
		setReady(t, env, pool, metav1.ConditionFalse, ipamv1.IPPoolExhaustedReason, "0 of 254 addresses free")
		poll.Eventually(t, 10*time.Second, "ADD with Ready=False/PoolExhausted and free addresses succeeds", func() error {
			attempt++
			_, err := sh.call("ADD", fmt.Sprintf("inv-2-%d", attempt), "", ref)
			return err
		})
	})

	// IPPool.spec.nodeSelector is enforced with the node's labels, from the agent's cache.
	t.Run("a pool's nodeSelector", func(t *testing.T) {
		create(t, &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ops-rack1"}, Spec: ipamv1.IPPoolSpec{Range: "10.40.0.0/24",
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "r1"}}}})
		onA, onB := netConf("rack", na.socket, `,"pool":"ops-rack1"`), netConf("rack", nb.socket, `,"pool":"ops-rack1"`)
		_, err := sh.call("ADD", "rack-b0", "", onB)
		wantCode(t, err, types.ErrInvalidNetworkConfig, `node "node-b": no Node object of that name, so a pool's nodeSelector cannot admit it`)
		create(t,
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"rack": "r1"}}},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b", Labels: map[string]string{"rack": "r2"}}})
		poll.Eventually(t, 10*time.Second, "the agent sees node-b's labels", func() error {
			_, err = sh.call("ADD", "rack-b1", "", onB)
			if err == nil || !strings.Contains(err.Error(), "does not admit node") {
				return fmt.Errorf("ADD: %v", err)
			}
			return nil
		})
		wantCode(t, err, types.ErrInvalidNetworkConfig, `IPPool ops-rack1 does not admit node node-b: its nodeSelector is "rack=r1"`)
		if ip := sh.addIP(t, "rack-a0", onA); ip != "10.40.0.1" {
			t.Errorf("ADD on node-a (rack r1) got %s", ip)
		}
	})

	// The controller removes derived pools that nothing uses; an agent that knew the pool derives
	// it again on its next call, rather than claiming in a pool that is gone.
	t.Run("a derived pool removed while the agent knows it", func(t *testing.T) {
		conf := netConf("gone", na.socket, `,"range":"10.99.0.0/24"`)
		if ip := sh.addIP(t, "gone-0", conf); ip != "10.99.0.1" {
			t.Fatalf("ADD got %s", ip)
		}
		if _, err := sh.call("DEL", "gone-0", "", conf); err != nil {
			t.Fatal(err)
		}
		first := &ipamv1.IPPool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "10.99.0.0-24"}, first); err != nil {
			t.Fatal(err)
		}
		var slices ipamv1.IPPoolSliceList
		if err := env.Client.List(ctx, &slices); err != nil {
			t.Fatal(err)
		}
		for _, sl := range slices.Items {
			if sl.Spec.Pool == first.Name {
				if err := env.Client.Delete(ctx, &sl); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := env.Client.Delete(ctx, first); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, 10*time.Second, "ADD after the pool was removed derives it again", func() error {
			_, err := sh.call("ADD", "gone-1", "", conf)
			if err != nil {
				return err
			}
			again := &ipamv1.IPPool{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: first.Name}, again); err != nil {
				return err
			}
			if again.UID == first.UID {
				return fmt.Errorf("the pool was not made again")
			}
			return nil
		})
	})

	t.Run("a config deriving more pools than allowed", func(t *testing.T) {
		var rs []string
		for i := range 17 {
			rs = append(rs, fmt.Sprintf(`{"range":"10.100.%d.0/24"}`, i))
		}
		_, err := sh.call("ADD", "many-0", "", netConf("many", na.socket, `,"ipRanges":[`+strings.Join(rs, ",")+`]`))
		wantCode(t, err, types.ErrInvalidNetworkConfig, "17 inline ranges would derive as many IPPools; one NAD may derive at most 16")
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "10.100.0.0-24"}, &ipamv1.IPPool{}); !apierrors.IsNotFound(err) {
			t.Errorf("a pool of the refused config: %v, want NotFound", err)
		}
	})

	// One limit on exclusions, the same in Kubernetes mode as in the embedded store.
	t.Run("a config over the exclusion limit", func(t *testing.T) {
		var ex []string
		for i := range 257 {
			ex = append(ex, fmt.Sprintf(`"10.98.%d.%d"`, i/100, 2*(i%100)+1))
		}
		conf := netConf("ex", na.socket, `,"range":"10.98.0.0/16","exclude":[`+strings.Join(ex, ",")+`]`)
		_, err := sh.call("ADD", "ex-0", "", conf)
		wantCode(t, err, types.ErrInvalidNetworkConfig, "the exclusions make more than 256 CIDRs")
		// The agent refuses it too, for a plugin that forwards without parsing.
		resp := na.agent.Handle(ctx, &agentproto.Request{Verb: "ADD", ContainerID: "ex-1", IfName: "net1", Stdin: conf})
		if resp.Error == nil || resp.Error.Code != types.ErrInvalidNetworkConfig || !strings.Contains(resp.Error.Msg, "the exclusions make more than 256 CIDRs") {
			t.Errorf("the agent's answer = %+v", resp)
		}
	})
}

// setReady writes pool's Ready condition as the controller does.
func setReady(t *testing.T, env *envtest.Env, pool *ipamv1.IPPool, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	ctx := context.Background()
	p := &ipamv1.IPPool{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), p); err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = []metav1.Condition{{Type: ipamv1.IPPoolReadyCondition, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: p.Generation, LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
}
