package cli

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/boltstore"
	"github.com/netpool/netpool/ipam"
)

// boltFixture makes a bbolt file as the plugin would, through the real allocator: network
// tenant-a with an IPv4 range (gateway, exclusions) and an IPv6 one, and an unnamed network.
// It returns the path.
func boltFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "netpool.db")
	s, err := boltstore.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	a := allocator.New(s)
	add := func(ipamJSON, cniArgs, container, ifName string) {
		t.Helper()
		c, err := ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"macvlan1","ipam":`+ipamJSON+`}`), cniArgs, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Add(context.Background(), c, allocator.Owner{ContainerID: container, IfName: ifName}); err != nil {
			t.Fatal(err)
		}
	}
	dual := `{"type":"netpool","network_name":"tenant-a","gateway":"10.77.0.1","ipRanges":[` +
		`{"range":"10.77.0.0/28","exclude":["10.77.0.8/30"]},{"range":"fd00:77::/120"}]}`
	add(dual, "K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0;K8S_POD_UID=uid-web-0", "c0ffee00", "net1")
	add(dual, "K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-1;K8S_POD_UID=uid-web-1", "c0ffee01", "net1")
	add(`{"type":"netpool","range":"192.168.77.0/29","range_start":"192.168.77.4"}`, "", "host-ctr", "eth1")
	return path
}

func TestBoltViewsGolden(t *testing.T) {
	db := boltFixture(t)
	now := viewClock()
	for _, tc := range []struct{ name, args string }{
		{"pools", "pools"},
		{"show", "show tenant-a/10.77.0.0/28"},
		{"whois-held", "whois 10.77.0.2"},
		{"whois-free", "whois 10.77.0.6"},
		{"whois-excluded", "whois 10.77.0.9"},
		{"whois-gateway", "whois 10.77.0.1"},
		{"whois-window", "whois 192.168.77.2"},
		{"pod", "pod shop/web-0"},
	} {
		for _, f := range goldenFormats {
			t.Run(tc.name+"/"+f, func(t *testing.T) {
				args := append([]string{"--db", db, "-o", f}, strings.Fields(tc.args)...)
				out, errOut, err := runView(t, now, "", args...)
				if err != nil {
					t.Fatalf("%v (stderr %q)", err, errOut)
				}
				assertGolden(t, "bolt/"+tc.name+"."+f, normaliseGolden(out))
			})
		}
	}
}

// TestBoltRecordsRanges: the store records each pool's range, so pools knows capacity and free;
// a claim by a config with another window records that one.
func TestBoltRecordsRanges(t *testing.T) {
	db := boltFixture(t)
	out, _, err := runView(t, viewClock(), "", "--db", db, "pools", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	// 10.77.0.0/28: 14 usable less the gateway and 10.77.0.8/30 = 9; two held.
	for _, want := range []string{`"capacity": "9"`, `"used": 2`, `"free": "7"`, `"rangeStart": "192.168.77.4"`, `"capacity": "3"`} {
		if !strings.Contains(out, want) {
			t.Errorf("pools -o json lacks %s:\n%s", want, out)
		}
	}
}

func TestBoltRelease(t *testing.T) {
	db := boltFixture(t)
	now := viewClock()
	held := func(addr string) bool {
		t.Helper()
		out, _, err := runView(t, now, "", "--db", db, "whois", addr, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(out, `"state": "Held"`)
	}
	t.Run("without --force refuses: an embedded owner counts as alive", func(t *testing.T) {
		_, _, err := runView(t, now, "y\n", "--db", db, "release", "10.77.0.2")
		if err == nil || !strings.Contains(err.Error(), "refusing to release, by the GC policy's rules") || !strings.Contains(err.Error(), "no pod API") {
			t.Fatalf("err = %v", err)
		}
		if !held("10.77.0.2") {
			t.Fatal("a refused release released the address")
		}
	})
	t.Run("an answer other than yes releases nothing", func(t *testing.T) {
		for _, answer := range []string{"n\n", "\n", "", "yess\n"} {
			_, errOut, err := runView(t, now, answer, "--db", db, "release", "10.77.0.2", "--force")
			if err == nil || !strings.Contains(err.Error(), "nothing released") {
				t.Fatalf("answer %q: err = %v", answer, err)
			}
			if !strings.Contains(errOut, "10.77.0.2 in pool tenant-a/10.77.0.0/28, held by pod shop/web-0") {
				t.Fatalf("the question does not name the allocation: %q", errOut)
			}
			if !held("10.77.0.2") {
				t.Fatalf("answer %q released the address", answer)
			}
		}
	})
	t.Run("--force with yes releases exactly it", func(t *testing.T) {
		out, _, err := runView(t, now, "yes\n", "--db", db, "release", "10.77.0.2", "--force")
		if err != nil {
			t.Fatal(err)
		}
		assertGolden(t, "bolt/release.table", out)
		if held("10.77.0.2") || !held("fd00:77::1") || !held("10.77.0.3") {
			t.Fatal("release did not release exactly 10.77.0.2")
		}
		// The address is free again for the allocator.
		s, err := boltstore.Open(db, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("--pod releases every address of the pod", func(t *testing.T) {
		out, _, err := runView(t, now, "", "--db", db, "-o", "json", "release", "--pod", "shop/web-1", "--force", "--yes")
		if err != nil {
			t.Fatal(err)
		}
		assertGolden(t, "bolt/release-pod.json", normaliseGolden(out))
		if held("10.77.0.3") || held("fd00:77::2") {
			t.Fatal("the pod's addresses are still held")
		}
		if !held("fd00:77::1") {
			t.Fatal("another pod's address was released")
		}
	})
	t.Run("every format prints what it released", func(t *testing.T) {
		for _, format := range goldenFormats {
			db := boltFixture(t)
			out, _, err := runView(t, now, "", "--db", db, "-o", format, "release", "10.77.0.2", "--force", "--yes")
			if err != nil {
				t.Fatal(err)
			}
			assertGolden(t, "bolt/release-ip."+format, normaliseGolden(out))
		}
	})
	t.Run("an address nobody holds", func(t *testing.T) {
		_, _, err := runView(t, now, "", "--db", db, "release", "10.77.0.2", "--force", "--yes")
		if err == nil || !strings.Contains(err.Error(), "no allocation of 10.77.0.2") {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestBoltBadArguments: each bad argument is a clear error, and the file stays as it was.
func TestBoltBadArguments(t *testing.T) {
	db := boltFixture(t)
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	corrupt := filepath.Join(dir, "corrupt.db")
	garbage := []byte(strings.Repeat("not a bbolt file ", 1024))
	if err := os.WriteFile(corrupt, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown pool", []string{"--db", db, "show", "tenant-b/10.0.0.0/24"}, `no such pool "tenant-b/10.0.0.0/24" in the bbolt: its pools are 192.168.77.0/29, tenant-a/10.77.0.0/28, tenant-a/fd00:77::/120`},
		{"malformed IP", []string{"--db", db, "whois", "10.77.0.300"}, `"10.77.0.300" is not an IP address`},
		{"malformed IP to release", []string{"--db", db, "release", "10.77.0", "--force", "--yes"}, `"10.77.0" is not an IP address`},
		{"IP outside every pool", []string{"--db", db, "whois", "172.16.0.1"}, "172.16.0.1 is outside every pool: its pools are 192.168.77.0/29 (192.168.77.0/29), tenant-a/10.77.0.0/28 (10.77.0.0/28)"},
		{"slices of an embedded store", []string{"--db", db, "show", "tenant-a/10.77.0.0/28", "--slices"}, "--slices: an embedded store has no node slices"},
		{"bad output format", []string{"--db", db, "pools", "-o", "xml"}, `unknown output format "xml"`},
		{"--db with --context", []string{"--db", db, "--context", "x", "pools"}, "cannot be combined"},
		{"release of an IP and --pod", []string{"--db", db, "release", "10.77.0.2", "--pod", "shop/web-0"}, "not both"},
		{"release of nothing", []string{"--db", db, "release"}, "give the IP to release"},
		{"--interface without --pod", []string{"--db", db, "release", "10.77.0.2", "--interface", "net1"}, "--interface narrows --pod"},
		{"malformed --pod", []string{"--db", db, "release", "--pod", "web-0"}, `--pod "web-0": want NAMESPACE/NAME`},
		{"missing db file", []string{"--db", missing, "pools"}, missing + " does not exist"},
		{"missing db file, release", []string{"--db", missing, "release", "10.77.0.2", "--force", "--yes"}, missing + " does not exist"},
		{"corrupt db file", []string{"--db", corrupt, "pools"}, "the database is corrupt"},
		{"corrupt db file, release", []string{"--db", corrupt, "release", "10.77.0.2", "--force", "--yes"}, "the database is corrupt"},
		{"empty db file", []string{"--db", empty, "whois", "10.77.0.2"}, "is empty: it holds no netpool store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runCLI(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if out != "" {
				t.Fatalf("a failed command printed %q", out)
			}
		})
	}
	if after, err := os.ReadFile(db); err != nil || string(after) != string(before) {
		t.Fatalf("the db file changed (%v)", err)
	}
	if after, err := os.ReadFile(corrupt); err != nil || string(after) != string(garbage) {
		t.Fatalf("the corrupt file changed (%v)", err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Fatalf("the empty file changed: %v, %v", fi, err)
	}
	for _, p := range []string{missing, missing + ".lock"} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s was created (%v)", p, err)
		}
	}
}

// TestBoltPoolWithoutRecordedRange: a pool whose file records no range (written before netpool
// recorded them) lists its CIDR and count with the range unknown, and whois says so.
func TestBoltPoolWithoutRecordedRange(t *testing.T) {
	db := boltFixture(t)
	raw, err := bolt.Open(db, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("pools")).Bucket([]byte("192.168.77.0/29")).Bucket([]byte("meta")).Delete([]byte("range"))
	})
	if cerr := raw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	now := viewClock()
	out, _, err := runView(t, now, "", "--db", db, "pools")
	if err != nil {
		t.Fatal(err)
	}
	row := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "192.168.77.0/29 ") {
			row = strings.Join(strings.Fields(l), " ")
		}
	}
	if row != "192.168.77.0/29 <none> 192.168.77.0/29 <none> 1 <none> <none> <none> 10h" {
		t.Fatalf("row %q in\n%s", row, out)
	}
	out, _, err = runView(t, now, "", "--db", db, "whois", "192.168.77.2", "-o", "json")
	if err != nil || !strings.Contains(out, `"state": "Unknown"`) || !strings.Contains(out, "no range recorded") {
		t.Fatalf("whois = %s, %v", out, err)
	}
}

// TestBoltReleaseOfAnAddressHeldInTwoNetworks: two networks may hold one address; release asks
// which (--pool) and then releases that one alone.
func TestBoltReleaseOfAnAddressHeldInTwoNetworks(t *testing.T) {
	db := boltFixture(t)
	s, err := boltstore.Open(db, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"other","ipam":{"type":"netpool","network_name":"tenant-b","range":"10.77.0.0/28"}}`), "IP=10.77.0.2", nil)
	if err == nil {
		_, err = allocator.New(s).Add(context.Background(), c, allocator.Owner{ContainerID: "b0", IfName: "net1"})
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	now := viewClock()
	out, _, err := runView(t, now, "", "--db", db, "whois", "10.77.0.2")
	if err != nil || strings.Count(out, " Held ") != 2 {
		t.Fatalf("whois = %s, %v; want two holders", out, err)
	}
	_, _, err = runView(t, now, "", "--db", db, "release", "10.77.0.2", "--force", "--yes")
	if err == nil || !strings.Contains(err.Error(), "10.77.0.2 is held in 2 pools (tenant-a/10.77.0.0/28, tenant-b/10.77.0.0/28): name one with --pool; nothing released") {
		t.Fatalf("err = %v", err)
	}
	if out, _, _ := runView(t, now, "", "--db", db, "whois", "10.77.0.2"); strings.Count(out, " Held ") != 2 {
		t.Fatalf("an ambiguous release released something:\n%s", out)
	}
	if _, _, err := runView(t, now, "", "--db", db, "release", "10.77.0.2", "--pool", "tenant-b/10.77.0.0/28", "--force", "--yes"); err != nil {
		t.Fatal(err)
	}
	out, _, err = runView(t, now, "", "--db", db, "whois", "10.77.0.2", "-o", "json")
	if err != nil || strings.Count(out, `"state": "Held"`) != 1 || !strings.Contains(out, `"containerID": "c0ffee00"`) {
		t.Fatalf("after releasing tenant-b's: %s, %v", out, err)
	}
}
