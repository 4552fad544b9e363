package ipamplugin

import (
	"io/fs"
	"os"
	"testing"
	"time"
)

// fakeInfo is enough of an fs.FileInfo for hostPath, which only asks whether stat succeeded.
type fakeInfo struct{}

func (fakeInfo) Name() string       { return "x" }
func (fakeInfo) Size() int64        { return 0 }
func (fakeInfo) Mode() fs.FileMode  { return fs.ModeSocket }
func (fakeInfo) ModTime() time.Time { return time.Time{} }
func (fakeInfo) IsDir() bool        { return false }
func (fakeInfo) Sys() any           { return nil }

func statOf(existing map[string]error) func(string) (fs.FileInfo, error) {
	return func(p string) (fs.FileInfo, error) {
		err, ok := existing[p]
		if !ok {
			return nil, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
		}
		if err != nil {
			return nil, err
		}
		return fakeInfo{}, nil
	}
}

func TestHostPath(t *testing.T) {
	const sock = "/run/netpool/agent.sock"
	for _, tc := range []struct {
		name     string
		existing map[string]error
		in, want string
	}{
		{"on the host", map[string]error{sock: nil, "/host" + sock: nil}, sock, sock},
		{"thick multus: host /run at /host/run", map[string]error{"/host" + sock: nil}, sock, "/host" + sock},
		{"thick multus: only the host root", map[string]error{"/hostroot" + sock: nil}, sock, "/hostroot" + sock},
		{"nowhere: the configured path is reported", map[string]error{}, sock, sock},
		{"exists but unusable: not second-guessed", map[string]error{sock: os.ErrPermission, "/host" + sock: nil}, sock, sock},
		{"relative paths are left alone", map[string]error{"/host/agent.sock": nil}, "agent.sock", "agent.sock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hostPath(tc.in, statOf(tc.existing)); got != tc.want {
				t.Errorf("hostPath(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
