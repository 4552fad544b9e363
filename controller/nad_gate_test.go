package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/controller/internal/nad"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/scheme"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

// TestControllerWaitsForTheNADCRD starts the controller on an API server without Multus' NAD CRD:
// it keeps running, logs what is missing and is not ready; once the CRD is installed it becomes
// ready and reconciles a NAD (the pool of its inline range is created).
func TestControllerWaitsForTheNADCRD(t *testing.T) {
	bare := envtest.Start(t) // netpool's CRDs only
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(bare.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	o.HealthProbeBindAddress = freeAddr(t)
	m := mustStartManager(t, bare.Config, o)

	readyz := func() (int, string, error) {
		resp, err := http.Get("http://" + o.HealthProbeBindAddress + "/readyz?verbose")
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }() // a read-only probe
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	poll.Eventually(t, 10*time.Second, "the wait is logged", func() error {
		if logs := m.Logs.String(); !strings.Contains(logs, "Waiting for the NetworkAttachmentDefinition CRD") ||
			!strings.Contains(logs, nad.CRDName) {
			return errors.New("no log of the missing CRD")
		}
		return nil
	})
	poll.Eventually(t, 10*time.Second, "/readyz answers, not ready", func() error {
		code, body, err := readyz()
		if err != nil {
			return err
		}
		if code == http.StatusOK || !strings.Contains(body, "[-]nad-crd failed") || !strings.Contains(body, "[+]cache ok") {
			return fmt.Errorf("/readyz %d %q, want a failure of the nad-crd check alone", code, body)
		}
		return nil
	})
	// The rest of the controller runs meanwhile: a pool gets its status.
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "waiting"}, Spec: ipamv1.IPPoolSpec{Range: "10.24.0.0/24"}}
	if err := c.Create(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, "the pool status is written while the NAD CRD is missing", func() error {
		got := &ipamv1.IPPool{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(pool), got); err != nil {
			return err
		}
		if got.Status.Capacity != "254" {
			return fmt.Errorf("status %+v", got.Status)
		}
		return nil
	})
	poll.Consistently(t, time.Second, "the manager keeps running", func() error {
		select {
		case err := <-m.Done():
			return fmt.Errorf("the manager stopped: %v", err)
		default:
			return nil
		}
	})

	bare.InstallNADCRD(t)
	poll.Eventually(t, 20*time.Second, "ready once the CRD is served", func() error {
		code, body, err := readyz()
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/readyz %d %q", code, body)
		}
		return nil
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "late-multus"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	nad := &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "net1", Namespace: ns.Name},
		Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.1.0","name":"net1","type":"macvlan",` +
			`"ipam":{"type":"netpool","datastore":"kubernetes","network_name":"late","range":"10.25.0.0/24"}}`},
	}
	if err := c.Create(context.Background(), nad); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, "the NAD is reconciled: its inline range's pool is created", func() error {
		return c.Get(context.Background(), client.ObjectKey{Name: ipamv1.PoolName("late", netip.MustParsePrefix("10.25.0.0/24"))}, &ipamv1.IPPool{})
	})
	if logs := m.Logs.String(); !strings.Contains(logs, "Starting the NAD reconciler") {
		t.Errorf("no log of the NAD reconciler's start")
	}
}
