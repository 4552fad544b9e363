package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// TestReleaseFromReport: leaks -o json feeds release --from-report, which judges every address
// again: one released since the report is Gone, one released and claimed anew (another UID) is
// refused, one that --grace now keeps is refused by that rule, and the rest are released through
// the conditional delete; a bad report changes nothing.
func TestReleaseFromReport(t *testing.T) {
	e := newLCEnv(t)
	const ns = "ctlops-report"
	e.namespace(ns)
	p := e.pool("ctlops-report", ipamv1.IPPoolSpec{Range: "10.77.4.0/24", NetworkName: "ctlops-report"})
	rs := map[string]*ipamv1.OverlappingRangeIPReservation{}
	for _, a := range []string{"10.77.4.10", "10.77.4.11", "10.77.4.12", "10.77.4.13"} {
		rs[a] = e.reservation(p, a, ns+"/gone-"+a[len(a)-2:], "uid-"+a, "ctlops-report-node", "")
	}
	now := latestCreation(rs["10.77.4.10"], rs["10.77.4.11"], rs["10.77.4.12"], rs["10.77.4.13"]).Add(30 * time.Second)
	kc := []string{"--kubeconfig", e.env.Kubeconfig}
	out, _, err := runCLIAt(t, now, append(kc, "leaks", "-n", ns, "--grace", "0s", "-o", "json")...)
	if err == nil || strings.Count(out, `"reservation"`) != 4 {
		t.Fatalf("leaks --grace 0s: %v\n%s", err, out)
	}
	report := filepath.Join(t.TempDir(), "leaks.json")
	if err := os.WriteFile(report, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	exists := func(r *ipamv1.OverlappingRangeIPReservation) (bool, string) {
		var got ipamv1.OverlappingRangeIPReservation
		err := e.c.Get(e.ctx, client.ObjectKeyFromObject(r), &got)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil, string(got.UID)
	}

	// Since the report: .12 was released, .11 released and claimed anew by another attachment.
	if err := e.c.Delete(e.ctx, rs["10.77.4.12"]); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(e.ctx, rs["10.77.4.11"]); err != nil {
		t.Fatal(err)
	}
	anew := e.reservation(p, "10.77.4.11", ns+"/gone-11", "uid-10.77.4.11", "ctlops-report-node", "")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a missing file", []string{"release", "--from-report", "/nonexistent/leaks.json", "--yes"}, "no such file"},
		{"an IP with it", []string{"release", "10.77.4.10", "--from-report", report, "--yes"}, "give no IP, --pod or --interface with it"},
		{"--force with it", []string{"release", "--from-report", report, "--force", "--yes"}, "--force does not apply"},
		{"stdin without --yes", []string{"release", "--from-report", "-"}, "add --yes"},
	} {
		if _, _, err := runCLIAt(t, now, append(kc, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
	for name, body := range map[string]string{
		"not a document":  "{not json",
		"another kind":    `{"apiVersion":"netpoolctl.netpool.io/v1","kind":"CheckReport","source":"cluster"}`,
		"a nameless leak": `{"apiVersion":"netpoolctl.netpool.io/v1","kind":"LeakList","grace":"0s","leaks":[{"address":"10.77.4.10"}]}`,
	} {
		bad := filepath.Join(t.TempDir(), "bad.json")
		if err := os.WriteFile(bad, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := runCLIAt(t, now, append(kc, "release", "--from-report", bad, "--yes")...); err == nil || !strings.Contains(err.Error(), "--from-report") {
			t.Errorf("%s: %v; want an error naming --from-report", name, err)
		}
	}

	// With --grace 2m every address is 30s old: alive by the grace rule, named as such.
	out, errOut, err := runCLIAt(t, now, append(kc, "release", "--from-report", report, "--grace", "2m", "--yes")...)
	if err == nil || !strings.Contains(out, "younger than the grace 2m0s") || !strings.Contains(out, "claimed anew since the report") ||
		!strings.Contains(out, "Gone (released since the report)") || !strings.Contains(errOut, "released 0, refused 3, already released 1") {
		t.Fatalf("release --from-report --grace 2m: %v\n%s%s", err, out, errOut)
	}
	for _, a := range []string{"10.77.4.10", "10.77.4.13"} {
		if ok, _ := exists(rs[a]); !ok {
			t.Fatalf("%s was released although --grace kept it", a)
		}
	}

	// With the report's grace (0s): .10 and .13 go, the new claim on .11 stays.
	out, errOut, err = runCLIAt(t, now, append(kc, "-o", "json", "release", "--from-report", report, "--yes")...)
	if err == nil || !strings.Contains(errOut, "released 2, refused 1, already released 1") {
		t.Fatalf("release --from-report: %v\n%s%s", err, out, errOut)
	}
	for _, a := range []string{"10.77.4.10", "10.77.4.13"} {
		if ok, _ := exists(rs[a]); ok {
			t.Errorf("%s was not released", a)
		}
	}
	if ok, uid := exists(anew); !ok || uid != string(anew.UID) {
		t.Fatal("the address claimed anew since the report was released")
	}
	if !strings.Contains(out, `"result": "Refused"`) || !strings.Contains(out, `"result": "Released"`) {
		t.Errorf("the Release document does not say each address's result:\n%s", out)
	}
}
