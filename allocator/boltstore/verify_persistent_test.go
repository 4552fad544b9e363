package boltstore

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/ipam"
)

// TestVerifyPersistent: a file with sticky pod names verifies clean, and each way its persistent
// entries can disagree with the allocations is a PersistentIndex finding naming the owner.
func TestVerifyPersistent(t *testing.T) {
	fixture := func(t *testing.T) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "netpool.db")
		s, err := Open(path, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"net1","ipam":{"range":"10.2.0.0/28","statefulSets":"Sticky"}}`),
			"K8S_POD_NAMESPACE=apps;K8S_POD_NAME=db-0", nil)
		if err != nil {
			t.Fatal(err)
		}
		a := allocator.New(s)
		for _, id := range []string{"c1", "c2"} { // the second re-binds db-0's address
			if _, err := a.Add(context.Background(), c, allocator.Owner{ContainerID: id, IfName: "eth0"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const key = "PodName/apps/db-0/eth0"
	for _, tt := range []struct {
		name   string
		break_ func(pool *bolt.Bucket) error
		want   string
	}{
		{name: "clean"},
		{name: "entry of no allocation", break_: func(pool *bolt.Bucket) error {
			return pool.Bucket(bucketPersistent).Put([]byte("PodName/apps/db-9/eth0"), key16("10.2.0.9"))
		}, want: "persistent owner PodName/apps/db-9/eth0 points at 10.2.0.9, which the pool does not hold"},
		{name: "entry missing", break_: func(pool *bolt.Bucket) error {
			return pool.Bucket(bucketPersistent).Delete([]byte(key))
		}, want: "10.2.0.1 records persistent owner " + key + ", whose entry does not point at it"},
		{name: "entry not an address", break_: func(pool *bolt.Bucket) error {
			return pool.Bucket(bucketPersistent).Put([]byte(key), []byte("x"))
		}, want: "persistent entry \"" + key + "\" -> 78 is not an address"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := fixture(t)
			if tt.break_ != nil {
				db, err := bolt.Open(path, 0o600, nil)
				if err != nil {
					t.Fatal(err)
				}
				err = db.Update(func(tx *bolt.Tx) error { return tt.break_(tx.Bucket(bucketPools).Bucket([]byte("10.2.0.0/28"))) })
				if cerr := db.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			v, err := Verify(t.Context(), path, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var texts []string
			for _, f := range v.Findings {
				texts = append(texts, f.String())
			}
			got := strings.Join(texts, "\n")
			if tt.want == "" {
				if got != "" {
					t.Fatalf("findings on a clean file: %s", got)
				}
				return
			}
			if len(v.Findings) == 0 || v.Findings[0].Kind != FindingPersistentIndex || !strings.Contains(got, tt.want) {
				t.Fatalf("findings %q, want a %s finding containing %q", got, FindingPersistentIndex, tt.want)
			}
		})
	}
}

func key16(s string) []byte { return key(netip.MustParseAddr(s)) }
