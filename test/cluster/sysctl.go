package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// savedSysctls are the machine-wide keys kubelet (or kube-proxy) may rewrite: kubelet sets
// vm.overcommit_memory, vm.panic_on_oom, kernel.panic, kernel.panic_on_oops and the kernel's key
// limits at start, and nothing leaves them alone (protectKernelDefaults turns the write into a start
// error instead). The harness saves them before and restores them after. Keys in a node's network
// namespace (net.*) go with the namespace.
var savedSysctls = []string{
	"vm.overcommit_memory",
	"vm.panic_on_oom",
	"kernel.panic",
	"kernel.panic_on_oops",
	"kernel.keys.root_maxkeys",
	"kernel.keys.root_maxbytes",
	"kernel.keys.maxkeys",
	"kernel.keys.maxbytes",
	"net.netfilter.nf_conntrack_max",
	"net.ipv4.ip_forward",
}

func sysctlPath(key string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
}

// readSysctls reads keys; a key this kernel does not have is left out.
func readSysctls(keys []string) (map[string]string, error) {
	out := map[string]string{}
	for _, k := range keys {
		b, err := os.ReadFile(sysctlPath(k))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("failed to read sysctl %s: %w", k, err)
		}
		out[k] = strings.TrimSpace(string(b))
	}
	return out, nil
}

// restoreSysctls writes back every saved value that differs now.
func restoreSysctls(saved map[string]string) error {
	now, err := readSysctls(savedSysctls)
	if err != nil {
		return err
	}
	var errs []string
	for k, v := range saved {
		if now[k] == v {
			continue
		}
		if err := os.WriteFile(sysctlPath(k), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%s: %v", k, v, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("failed to restore sysctls: %s", strings.Join(errs, "; "))
	}
	return nil
}

// sysctlRecord keeps the saved values outside the state directory while a cluster runs, so that
// the next Start restores them when this cluster is killed before it can.
const sysctlRecord = "/run/netpool-test-cluster.sysctls"

func recordSysctls(saved map[string]string) error {
	var b strings.Builder
	for k, v := range saved {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return os.WriteFile(sysctlRecord, []byte(b.String()), 0o600)
}

// restoreRecorded restores and removes a record an earlier cluster left.
func restoreRecorded() error {
	data, err := os.ReadFile(sysctlRecord)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	saved := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			saved[k] = v
		}
	}
	if err := restoreSysctls(saved); err != nil {
		return err
	}
	return os.Remove(sysctlRecord)
}
