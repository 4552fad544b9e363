package harness

import "testing"

// SkipShort skips t under go test -short (make unit), saying what it needs that a unit run does
// not give: root, the binaries built from this checkout or third-party ones, or an API server.
// A plain go test (make test) never skips here.
func SkipShort(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s; skipped under -short", needs)
	}
}
