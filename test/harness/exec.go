package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// Invocation is one plugin call, as a runtime makes it: the CNI_* environment and the network
// configuration on stdin.
type Invocation struct {
	Command     string // CNI_COMMAND: ADD, DEL, CHECK, GC, STATUS or VERSION
	ContainerID string // CNI_CONTAINERID
	IfName      string // CNI_IFNAME
	// NetNS is CNI_NETNS. An IPAM plugin never enters it, so any path will do; empty means
	// DefaultNetNS for the verbs that need one.
	NetNS  string
	Args   string // CNI_ARGS
	Path   string // CNI_PATH; empty means the directory of the plugin
	Config []byte // stdin
}

// DefaultNetNS is the CNI_NETNS given to verbs that need one when an Invocation names none.
const DefaultNetNS = "/var/run/netns/netpool-test"

// Outcome is what one plugin process did.
type Outcome struct {
	Stdout, Stderr []byte
	// Elapsed is the wall time from start to exit, process start-up included.
	Elapsed time.Duration
	// MaxRSSKiB is the peak resident set size of the process, as the kernel reports it (KiB).
	MaxRSSKiB int64
}

// Result decodes the ADD result on stdout.
func (o Outcome) Result() (*current.Result, error) {
	r, err := current.NewResult(o.Stdout)
	if err != nil {
		return nil, fmt.Errorf("failed to decode result %q: %w", o.Stdout, err)
	}
	return current.NewResultFromResult(r)
}

// Addrs returns the addresses of the ADD result on stdout, without prefix lengths.
func (o Outcome) Addrs() ([]netip.Addr, error) {
	res, err := o.Result()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(res.IPs))
	for _, ipc := range res.IPs {
		a, ok := netip.AddrFromSlice(ipc.Address.IP)
		if !ok {
			return nil, fmt.Errorf("bad address %v in result %s", ipc.Address, o.Stdout)
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

// Command returns the process for inv, not started. Tests that signal the plugin start it
// themselves; everyone else calls Exec.
func Command(ctx context.Context, plugin string, inv Invocation) *exec.Cmd {
	cmd := exec.CommandContext(ctx, plugin)
	cmd.Stdin = bytes.NewReader(inv.Config)
	cmd.Env = pluginEnv(plugin, inv)
	return cmd
}

func pluginEnv(plugin string, inv Invocation) []string {
	env := make([]string, 0, len(os.Environ())+7)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CNI_") {
			env = append(env, kv)
		}
	}
	path := inv.Path
	if path == "" {
		path = filepath.Dir(plugin)
	}
	netns := inv.NetNS
	if netns == "" && (inv.Command == "ADD" || inv.Command == "CHECK") {
		netns = DefaultNetNS
	}
	return append(env,
		"CNI_COMMAND="+inv.Command,
		"CNI_CONTAINERID="+inv.ContainerID,
		"CNI_IFNAME="+inv.IfName,
		"CNI_NETNS="+netns,
		"CNI_ARGS="+inv.Args,
		"CNI_PATH="+path,
	)
}

// Exec runs plugin once with inv and waits for it. The error is a *types.Error when the plugin
// exited non-zero with a CNI error on stdout, and some other error when it could not be run,
// was killed, or failed without one. The Outcome is filled in either case once the process ran.
func Exec(ctx context.Context, plugin string, inv Invocation) (Outcome, error) {
	cmd := Command(ctx, plugin, inv)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	runErr := cmd.Run()
	out := Outcome{Elapsed: time.Since(start), Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			out.MaxRSSKiB = ru.Maxrss
		}
	}
	return out, exitError(inv.Command, out, runErr)
}

// exitError turns a finished process into Exec's error.
func exitError(verb string, out Outcome, runErr error) error {
	if runErr == nil {
		return nil
	}
	var exitErr *exec.ExitError
	if !errors.As(runErr, &exitErr) || !exitErr.Exited() {
		return fmt.Errorf("%s did not finish: %w (stderr %q)", verb, runErr, out.Stderr)
	}
	var cniErr types.Error
	if err := json.Unmarshal(out.Stdout, &cniErr); err != nil || cniErr.Code == 0 {
		return fmt.Errorf("%s exited with status %d without a CNI error on stdout: stdout %q, stderr %q",
			verb, exitErr.ExitCode(), out.Stdout, out.Stderr)
	}
	return &cniErr
}

// CNIErrorCode returns the code of a *types.Error in err's chain, and 0 when there is none.
func CNIErrorCode(err error) uint {
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		return cniErr.Code
	}
	return 0
}
