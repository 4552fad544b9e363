package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness"
)

// thickView is the file system that Multus 4's thick DaemonSet (deployments/multus-daemonset-thick.yml
// of v4.2.2) gives the multus-daemon container, in which it runs every delegate: the CNI bin dir at
// its host path, the host's /run at /host/run, the host's /etc/cni/net.d at /host/etc/cni/net.d and
// /run/netns at its host path. The container's own /run is empty. (The DaemonSet also mounts the
// host's root at /hostroot, which netpool tries after /host; it is left out here.)
type thickView struct {
	root  string
	binds []harness.Bind
}

// newThickView lays out the container's root under a temporary directory. withHostRun false leaves
// /host/run out, as a control: the container then cannot see the agent at all.
func newThickView(t *testing.T, binDir, hostNetD string, withHostRun bool) *thickView {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	v := &thickView{root: root}
	mount := func(source, target string) {
		if err := os.MkdirAll(filepath.Join(root, target), 0o755); err != nil {
			t.Fatal(err)
		}
		v.binds = append(v.binds, harness.Bind{Source: source, Target: filepath.Join(root, target)})
	}
	if err := os.MkdirAll(filepath.Join(root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	mount(binDir, "/opt/cni/bin")
	if withHostRun {
		mount("/run", "/host/run")
	}
	mount(hostNetD, "/host/etc/cni/net.d")
	mount("/var/run/netns", "/run/netns")
	return v
}

// exec runs the netpool binary of the view's /opt/cni/bin inside the view, as the multus-daemon
// would after its bridge delegate handed IPAM to it, and returns the CNI result or error.
func (v *thickView) exec(t *testing.T, command, containerID string, stdin []byte) (*current.Result, error) {
	t.Helper()
	cmd := harness.MountViewCommand(v.binds, "chroot", v.root, "/opt/cni/bin/netpool")
	cmd.Env = append(os.Environ(),
		"CNI_COMMAND="+command, "CNI_CONTAINERID="+containerID, "CNI_NETNS=/run/netns/thick-unused",
		"CNI_IFNAME=net1", "CNI_PATH=/opt/cni/bin",
		"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=thick;K8S_POD_NAME=pod-"+containerID)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("running netpool in the thick view: %v\n%s", err, stderr.Bytes())
	}
	if err != nil {
		cniErr := &types.Error{}
		if jerr := json.Unmarshal(stdout.Bytes(), cniErr); jerr != nil {
			t.Fatalf("netpool %s failed without CNI error JSON (%v): stdout %q stderr %q", command, err, stdout.Bytes(), stderr.Bytes())
		}
		return nil, cniErr
	}
	if command != "ADD" {
		return nil, nil
	}
	res := &current.Result{}
	if err := json.Unmarshal(stdout.Bytes(), res); err != nil {
		t.Fatalf("netpool ADD result %q: %v", stdout.Bytes(), err)
	}
	return res, nil
}

// TestMultusThickMode runs the built plugin in a mount namespace laid out like Multus' thick
// multus-daemon container. The agent's socket and the global flat file sit at their host paths,
// which that container sees only under /host: netpool must find both there. Without /host/run in
// the view (the control) the agent cannot be reached, which is what every call met before.
func TestMultusThickMode(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	env := envtest.Start(t)
	// The agent listens at a host path under /run, as the DaemonSet's /run/netpool/agent.sock does.
	runDir, err := os.MkdirTemp("/run", "netpool-e2e-thick-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(runDir) })
	socket := filepath.Join(runDir, "agent.sock")
	mustAgentAt(t, env, "node-a", socket)

	// The host's /etc/cni/net.d holds the global flat file that names the agent's socket; the NAD
	// names only its range and the datastore.
	hostNetD := t.TempDir()
	flat, err := json.Marshal(map[string]any{"kubernetes": map[string]any{"agent_socket": socket}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(hostNetD, "netpool.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hostNetD, "netpool.d", "netpool.conf"), flat, 0o644); err != nil {
		t.Fatal(err)
	}
	subnet := netip.MustParsePrefix("10.86.0.0/24")
	conf, err := json.Marshal(map[string]any{
		"cniVersion": harness.CNIVersion, "name": "thick", "type": "bridge",
		"ipam": map[string]any{"type": "netpool", "datastore": "kubernetes", "range": subnet.String()},
	})
	if err != nil {
		t.Fatal(err)
	}
	bin := harness.MustBinDir(t)

	t.Run("control: without /host/run the agent is out of sight", func(t *testing.T) {
		_, err := newThickView(t, bin, hostNetD, false).exec(t, "ADD", "thick-control", conf)
		var cniErr *types.Error
		if !errors.As(err, &cniErr) || cniErr.Code != types.ErrTryAgainLater || !strings.Contains(cniErr.Msg, socket) {
			t.Fatalf("ADD without /host/run: %v, want code 11 naming %s", err, socket)
		}
	})

	view := newThickView(t, bin, hostNetD, true)
	res, err := view.exec(t, "ADD", "thick-1", conf)
	if err != nil {
		t.Fatalf("ADD in the thick view: %v", err)
	}
	if len(res.IPs) != 1 || !subnet.Contains(netip.MustParseAddr(res.IPs[0].Address.IP.String())) {
		t.Fatalf("ADD in the thick view got %v, want one address of %s", res.IPs, subnet)
	}
	addr := res.IPs[0].Address.IP.String()
	r, ok := reservations(t, env, "10.86.0.0-24")["thick-1"]
	if !ok || r.Spec.Address != addr || r.Spec.Node != "node-a" || r.Spec.PodRef != "thick/pod-thick-1" {
		t.Fatalf("reservation after the thick ADD = %+v (found %v), want %s on node-a for thick/pod-thick-1", r.Spec, ok, addr)
	}
	if _, err := view.exec(t, "DEL", "thick-1", conf); err != nil {
		t.Fatalf("DEL in the thick view: %v", err)
	}
	if r, ok := reservations(t, env, "10.86.0.0-24")["thick-1"]; ok {
		t.Fatalf("DEL in the thick view left %s reserved", r.Spec.Address)
	}
}
