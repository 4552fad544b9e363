package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/netpool/netpool/controller"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness"
	"github.com/netpool/netpool/test/poll"
)

// TestKubeVirtIPAMExtensions runs a KubeVirt VM's life with the objects exactly as KubeVirt and
// kubevirt/ipam-extensions make them (testdata/ipam-extensions, with their source): a NAD with
// allowPersistentIPs at its config's top level, an IPAMClaim with no spec.interface named
// <vm>.<VM network name>, and launcher pods whose network selection element carries KubeVirt's
// hashed interface name. On a real API server with two agents and the controller, through libcni
// into network namespaces: the VM keeps its address over a live migration from node-a to node-b
// (source and target pods at once), the controller removes the source's user once its pod is gone,
// the address stays while the VM is stopped and returns on its restart, and goes once the claim
// is gone (ipam-extensions' finalizer removed), not before.
func TestKubeVirtIPAMExtensions(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)
	env := envtest.Start(t) // its own API server: the controller's GC runs cluster-wide
	env.InstallIPAMClaimCRD(t)
	const grace = time.Second
	c := mustControllerWith(t, env, func(o *controller.Options) {
		o.GCGrace, o.SweepInterval = grace, 500*time.Millisecond
	})
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vms"}}))

	nad := &nadv1.NetworkAttachmentDefinition{}
	readTestdata(t, "nad.yaml", nad)
	var nodes []*harness.Network
	for _, node := range []string{"a", "b"} {
		socket := mustAgent(t, env, "node-"+node)
		config := strings.NewReplacer("BRIDGE", "np-kvbr"+node, "AGENT_SOCKET", socket).Replace(nad.Spec.Config)
		nodes = append(nodes, mustNetwork(t, mustNetNS(t), asMultusDelegates(t, config), nil))
	}
	nodeA, nodeB := nodes[0], nodes[1]
	const ifName = "pod8f202bdbf25" // KubeVirt's pod interface name of the VM network anet

	claim := &ipamclaimsv1.IPAMClaim{}
	readTestdata(t, "ipamclaim.yaml", claim)
	must(t, c.Create(ctx, claim))
	launcher := func(file string) *corev1.Pod {
		t.Helper()
		pod := &corev1.Pod{}
		readTestdata(t, file, pod)
		must(t, c.Create(ctx, pod))
		return pod
	}
	source := launcher("launcher-source.yaml")
	attS := podAttachment("kv-source", mustNetNS(t), ifName, "vms", source.Name)
	x := resultIPs(t, mustAdd(ctx, t, nodeA, attS))[0]
	assertClaimStatus(ctx, t, c, "vms", claim.Name, x, source.Name)
	if r := claimedReservation(ctx, t, c, x.Addr()); r.Spec.Owner == nil || r.Spec.Owner.UID != string(claim.UID) {
		t.Fatalf("reservation of %s: owner %+v, want claim vms/%s with its UID %s", x, r.Spec.Owner, claim.Name, claim.UID)
	}

	t.Run("live migration to node-b", func(t *testing.T) {
		target := launcher("launcher-target.yaml")
		attT := podAttachment("kv-target", mustNetNS(t), ifName, "vms", target.Name)
		if got := resultIPs(t, mustAdd(ctx, t, nodeB, attT))[0]; got != x {
			t.Fatalf("the migration target on node-b got %s while the source holds %s", got, x)
		}
		r := claimedReservation(ctx, t, c, x.Addr())
		if r.Spec.Node != "node-b" || !hasUser(r, "kv-source", "node-a") || !hasUser(r, "kv-target", "node-b") {
			t.Fatalf("during the migration the reservation is on %s with users %+v, want node-b with source and target", r.Spec.Node, r.Spec.Users)
		}
		assertClaimStatus(ctx, t, c, "vms", claim.Name, x, target.Name)
		// The migration ends: the source's DEL on node-a (which no longer holds the reservation)
		// changes nothing there, and its pod goes; the controller removes its user.
		mustDel(ctx, t, nodeA, attS)
		must(t, c.Delete(ctx, source, client.GracePeriodSeconds(0)))
		poll.Eventually(t, 30*time.Second, "the source's user goes", func() error {
			r, err := reservationAt(ctx, c, x.Addr())
			switch {
			case err != nil:
				return err
			case r == nil:
				return fmt.Errorf("the reservation of %s is gone", x)
			case len(r.Spec.Users) != 1 || r.Spec.Users[0].ContainerID != "kv-target":
				return fmt.Errorf("users %+v, want the target's alone", r.Spec.Users)
			}
			return nil
		})
		mustCheck(ctx, t, nodeB, attT)

		t.Run("a stopped VM keeps its address and gets it back", func(t *testing.T) {
			before := claimedReservation(ctx, t, c, x.Addr())
			mustDel(ctx, t, nodeB, attT)
			must(t, c.Delete(ctx, target, client.GracePeriodSeconds(0)))
			time.Sleep(4 * grace) // judged at once and at every sweep: it must stay
			if r := claimedReservation(ctx, t, c, x.Addr()); r.UID != before.UID || len(r.Spec.Users) != 0 {
				t.Fatalf("the stopped VM's reservation is %s with %+v, want %s with no users", r.UID, r.Spec, before.UID)
			}
			restarted := launcher("launcher-source.yaml") // a new launcher pod of the same shape on node-a
			attR := podAttachment("kv-restart", mustNetNS(t), ifName, "vms", restarted.Name)
			if got := resultIPs(t, mustAdd(ctx, t, nodeA, attR))[0]; got != x {
				t.Fatalf("the restarted VM got %s, want its claim's %s", got, x)
			}
			mustDel(ctx, t, nodeA, attR)
			must(t, c.Delete(ctx, restarted, client.GracePeriodSeconds(0)))

			t.Run("the address goes with the claim, once ipam-extensions lets it go", func(t *testing.T) {
				must(t, c.Delete(ctx, claim))
				time.Sleep(4 * grace) // the claim is terminating, held by its finalizer: it still exists
				if r, err := reservationAt(ctx, c, x.Addr()); err != nil || r == nil {
					t.Fatalf("the address of a claim held by its finalizer was released (%v)", err)
				}
				// What ipam-extensions does once the VM is gone: it removes its finalizer.
				must(t, c.Get(ctx, client.ObjectKeyFromObject(claim), claim))
				claim.Finalizers = slices.DeleteFunc(claim.Finalizers, func(f string) bool { return f == "kubevirt.io/persistent-ipam" })
				must(t, c.Update(ctx, claim))
				poll.Eventually(t, 30*time.Second, "the release of "+x.String(), func() error {
					r, err := reservationAt(ctx, c, x.Addr())
					if err == nil && r != nil {
						err = fmt.Errorf("reservation %s still there", r.Name)
					}
					return err
				})
			})
		})
	})
	var list ipamv1.OverlappingRangeIPReservationList
	must(t, c.List(ctx, &list))
	if len(list.Items) != 0 {
		t.Fatalf("reservations left: %d", len(list.Items))
	}
}

// readTestdata decodes testdata/ipam-extensions/name into obj.
func readTestdata(t *testing.T, name string, obj any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "ipam-extensions", name))
	must(t, err)
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// asMultusDelegates turns a NAD config of one plugin into the plugin list Multus runs: the whole
// config as the only plugin, so the plugin (and the IPAM plugin it delegates to) sees its top-level
// keys, allowPersistentIPs among them.
func asMultusDelegates(t *testing.T, config string) []byte {
	t.Helper()
	var plugin map[string]any
	must(t, json.Unmarshal([]byte(config), &plugin))
	b, err := json.Marshal(map[string]any{"cniVersion": plugin["cniVersion"], "name": plugin["name"], "plugins": []any{plugin}})
	must(t, err)
	return b
}
