package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/gcpolicy"
)

// TestLeaksListsEachReasonAndChangesNothing: one reservation per reason of the GC policy, and
// reservations of a live pod, a pending pod and a pod whose network-status cannot be read,
// which are kept.
func TestLeaksListsEachReasonAndChangesNothing(t *testing.T) {
	e := newLCEnv(t)
	const ns = "ctlops-leaks"
	e.namespace(ns)
	e.node("ctlops-leaks-node-a")
	e.node("ctlops-leaks-node-b")
	p := e.pool("ctlops-leaks", ipamv1.IPPoolSpec{Range: "10.77.0.0/24", NetworkName: "ctlops-leaks"})
	var norm lcNormaliser
	replaced := e.pod(ns, "replaced", corev1.PodRunning, nil, "10.77.0.11")
	done := e.pod(ns, "done", corev1.PodSucceeded, nil)
	moved := e.pod(ns, "moved", corev1.PodRunning, nil, "10.77.0.99")
	live := e.pod(ns, "live", corev1.PodRunning, nil, "10.77.0.14")
	pending := e.pod(ns, "pending", corev1.PodPending, nil)
	orphaned := e.pod(ns, "orphaned", corev1.PodRunning, nil, "10.77.0.17")
	garbled := "{not json"
	unreadable := e.pod(ns, "garbled", corev1.PodRunning, &garbled)
	for _, pod := range []*corev1.Pod{replaced, done, moved, live, pending, unreadable, orphaned} {
		norm.uid(string(pod.UID), "uid-of-"+pod.Name)
	}
	rs := []*ipamv1.OverlappingRangeIPReservation{
		e.reservation(p, "10.77.0.10", ns+"/gone", "uid-of-gone-pod", "ctlops-leaks-node-a", ""),
		e.reservation(p, "10.77.0.11", ns+"/replaced", "uid-of-the-pod-before", "ctlops-leaks-node-a", ""),
		e.reservation(p, "10.77.0.12", ns+"/done", string(done.UID), "ctlops-leaks-node-b", ""),
		e.reservation(p, "10.77.0.13", ns+"/moved", string(moved.UID), "ctlops-leaks-node-b", ""),
		e.reservation(p, "10.77.0.14", ns+"/live", string(live.UID), "ctlops-leaks-node-a", ""),
		e.reservation(p, "10.77.0.15", ns+"/pending", string(pending.UID), "ctlops-leaks-node-a", ""),
		e.reservation(p, "10.77.0.16", ns+"/garbled", string(unreadable.UID), "ctlops-leaks-node-a", ""),
		// Its pod lives, but its node is gone: the node reclaim's rule releases it.
		e.reservation(p, "10.77.0.17", ns+"/orphaned", string(orphaned.UID), "ctlops-leaks-node-gone", ""),
	}
	now := latestCreation(rs...).Add(time.Hour + 30*time.Second)
	before := e.snapshot()

	for _, f := range []string{"table", "wide", "json", "yaml"} {
		t.Run("-o "+f, func(t *testing.T) {
			out, errOut, err := runCLIAt(t, now, "--kubeconfig", e.env.Kubeconfig, "leaks", "-n", ns, "-o", f)
			if err != nil {
				t.Fatalf("leaks: %v (stderr %s)", err, errOut)
			}
			if !strings.Contains(errOut, "reservation ctlops-leaks.10.77.0.16 (10.77.0.16) cannot be judged and is kept") {
				t.Errorf("stderr %q does not name the unjudgeable reservation", errOut)
			}
			assertGolden(t, "leaks."+f, norm.apply(out))
		})
	}

	out, _, err := runCLIAt(t, now, "--kubeconfig", e.env.Kubeconfig, "leaks", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var report leakReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"10.77.0.10": gcpolicy.ReasonPodDeleted, "10.77.0.11": gcpolicy.ReasonPodReplaced,
		"10.77.0.12": gcpolicy.ReasonPodFinished, "10.77.0.13": gcpolicy.ReasonNotInNetworkStatus,
		"10.77.0.17": gcpolicy.ReasonNodeDeleted,
	}
	got := map[string]string{}
	for _, l := range report.Leaks {
		got[l.Address] = l.Reason
	}
	if len(got) != len(want) || report.Grace != "2m0s" {
		t.Fatalf("leaks %v, grace %s; want %v and the controller's grace 2m0s", got, report.Grace, want)
	}
	for a, reason := range want {
		if got[a] != reason {
			t.Errorf("%s: reason %q, want %q", a, got[a], reason)
		}
	}

	t.Run("younger than --grace is no leak", func(t *testing.T) {
		out, errOut, err := runCLIAt(t, now, "--kubeconfig", e.env.Kubeconfig, "leaks", "-n", ns, "--grace", "2h")
		if err != nil || out != "" || !strings.Contains(errOut, "No leaked reservations (grace 2h0m0s).") {
			t.Fatalf("leaks --grace 2h: %q, %q, %v", out, errOut, err)
		}
	})
	if after := e.snapshot(); !bytes.Equal(before, after) {
		t.Fatalf("leaks changed reservations:\n%s\nthen\n%s", before, after)
	}
}

func TestLeaksRefusesBadArguments(t *testing.T) {
	e := newLCEnv(t)
	before := e.snapshot()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"a malformed grace", []string{"leaks", "--grace", "soon"}, `invalid argument "soon" for "--grace"`},
		{"a negative grace", []string{"--kubeconfig", e.env.Kubeconfig, "leaks", "--grace", "-1m"}, "--grace must not be negative"},
		{"an unknown format", []string{"--kubeconfig", e.env.Kubeconfig, "leaks", "-o", "xml"}, `unknown output format "xml"`},
		{"an argument", []string{"leaks", "10.0.0.1"}, `unknown command "10.0.0.1"`},
		{"an embedded store", []string{"--db", "/nonexistent/netpool.db", "leaks"}, "an embedded (--db) store records no pod liveness"},
		{"--db with --kubeconfig", []string{"--db", "x.db", "--kubeconfig", e.env.Kubeconfig, "leaks"}, "cannot be combined"},
		{"an unreachable cluster", []string{"--kubeconfig", lcUnreachableKubeconfig(t, false), "--request-timeout", "2s", "leaks"}, "failed to list the reservations"},
		{"a cluster that never answers", []string{"--kubeconfig", lcUnreachableKubeconfig(t, true), "--request-timeout", "300ms", "leaks"}, "failed to list the reservations"},
		{"a missing kubeconfig", []string{"--kubeconfig", "/nonexistent/kubeconfig", "leaks"}, "failed to load the cluster's client config"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCLI(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v: %v; want an error containing %q", tt.args, err, tt.want)
			}
			if out != "" {
				t.Fatalf("printed %q on stdout", out)
			}
		})
	}
	if after := e.snapshot(); !bytes.Equal(before, after) {
		t.Fatal("a refused leaks changed reservations")
	}
}
