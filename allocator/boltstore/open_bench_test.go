package boltstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkOpenClose is what every plugin call pays to open the store: the sidecar lock, the
// checks of the file before it is mapped, bbolt's open and the close. On a small file and on one
// of about 10 MiB in use, in the state the last call left ("remembered", what a plugin call meets)
// and with the page graph walked on every open ("walked", the first call after a file changed).
func BenchmarkOpenClose(b *testing.B) {
	for _, size := range []struct {
		name        string
		allocations int
	}{{"small", 0}, {"10MiB", 14500}} {
		path := filepath.Join(b.TempDir(), "netpool.db")
		if size.allocations == 0 {
			s, err := Open(path, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		} else {
			db, err := buildGolden(size.allocations)
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(path, db, 0o600); err != nil {
				b.Fatal(err)
			}
		}
		db, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		used := float64(highWater(b, db)) / (1 << 20)
		for _, walk := range []bool{false, true} {
			mode := "remembered"
			if walk {
				mode = "walked"
			}
			b.Run(fmt.Sprintf("%s/%s", size.name, mode), func(b *testing.B) {
				// Overwritten in place, not truncated: ext4 flushes a file truncated and written
				// again on its close, which would charge a write-back to every walk.
				lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
				if err != nil {
					b.Fatal(err)
				}
				defer lock.Close()
				before := pageGraphWalks.Load()
				for b.Loop() {
					if walk {
						if _, err := lock.WriteAt([]byte("forgotten"), 0); err != nil {
							b.Fatal(err)
						}
					}
					s, err := Open(path, time.Second)
					if err != nil {
						b.Fatal(err)
					}
					if err := s.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(used, "MiB-in-use")
				b.ReportMetric(float64(pageGraphWalks.Load()-before)/float64(b.N), "walks/op")
			})
		}
	}
}
