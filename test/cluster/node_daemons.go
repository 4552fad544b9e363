package cluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// PauseImage is the pod sandbox image: a locally built pause (it reaps children and exits on
// SIGTERM), tagged with the name kubelet and the README's quick start use, and pinned in containerd
// so that it is never pulled or collected.
const PauseImage = "registry.k8s.io/pause:3.10"

// containerdConfig is the node's containerd: the CRI with runc under cgroupfs (this machine has
// only cgroup v1), restrict_oom_score_adj (root here lacks CAP_SYS_RESOURCE, so runc cannot lower
// a container's oom_score_adj), the overlayfs snapshotter, the CNI directories of a node.
func containerdConfig(bin string) string {
	return fmt.Sprintf(`version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "%s/runc"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/opt/cni/bin"]
    conf_dir = "/etc/cni/net.d"
    max_conf_num = 1

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "%s"
`, bin, PauseImage)
}

// kubeletConfig is the KubeletConfiguration that runs pods on this machine: cgroup v1 accepted
// (failCgroupV1: false; kubelet 1.35+ refuses v1 by default), no swap check, the cgroupfs driver
// with a cgroup root of the node's own, and no iptables chains (kube-proxy owns the rules).
func (n *Node) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: /%s/%s
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
address: %s
readOnlyPort: 0
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
evictionHard: {}
makeIPTablesUtilChains: false
serializeImagePulls: false
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
fileCheckFrequency: 10s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: /etc/resolv.conf
`, cgroupParent, n.Name, n.Addr)
}

// kubeProxyConfig is kube-proxy in nftables mode (this kernel has no IPVS), leaving the machine's
// conntrack limits alone (they are not per namespace).
func (n *Node) kubeProxyConfig(kubeconfig string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
bindAddress: %s
clusterCIDR: %s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, n.Name, n.Addr, podCIDR)
}

// multusKubeconfig is the Multus thin plugin's kubeconfig on a node (the user multusUser).
const multusKubeconfig = "/etc/cni/net.d/multus.d/multus.kubeconfig"

// cniConfig is the node's pod network behind the Multus thin plugin: Multus delegates the pod's
// eth0 to the node's pod bridge (podBridge) with portmap, and each network the pod asks for to its
// NAD.
func (n *Node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "multus-cni-network",
  "type": "multus",
  "kubeconfig": %q,
  "logFile": "/var/log/multus.log",
  "logLevel": "verbose",
  "delegates": [{
    "cniVersion": "1.0.0",
    "name": %q,
    "plugins": [
      {%s},
      {"type": "portmap", "capabilities": {"portMappings": true}}
    ]
  }]
}
`, multusKubeconfig, PodNetwork, n.podBridge())
}

// PodNetwork is the CNI network name of every pod's eth0: host-local keeps the node's pod
// addresses under /var/lib/cni/networks/<PodNetwork>/.
const PodNetwork = "podnet"

// podBridge is the plugin of every pod's eth0, whether Multus runs thin (cniConfig) or thick
// (thickPrimaryConfig): a bridge with the node's pod subnet, its addresses from host-local.
func (n *Node) podBridge() string {
	return fmt.Sprintf(`"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
       "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}`, n.PodCIDR)
}

// writeThinConfig writes the node's CNI configuration, cniConfig, as 00-multus.conf: at the start
// and when UseMultusThin switches back. It replaces the file (temporary name, rename), so the
// runtime never reads half of it and the mode is always 0644.
func (n *Node) writeThinConfig() error {
	return writeFileAtomic(filepath.Join(n.Path("/etc/cni/net.d"), multusConfFile), []byte(n.cniConfig()), 0o644)
}

// writeNodeFiles writes the node's configuration and installs the CNI plugins in its /opt/cni/bin.
func (n *Node) writeNodeFiles(c *Cluster) error {
	files := map[string]string{
		filepath.Join(n.dir, "containerd.toml"): containerdConfig(c.BinDir),
		filepath.Join(n.dir, "kubelet.yaml"):    n.kubeletConfig(),
		filepath.Join(n.dir, "kube-proxy.yaml"): n.kubeProxyConfig(filepath.Join(n.dir, "kube-proxy.kubeconfig")),
	}
	for p, data := range files {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			return err
		}
	}
	if err := n.writeThinConfig(); err != nil {
		return err
	}
	server := fmt.Sprintf("https://%s:%d", hostAddr, apiPort)
	for path, user := range map[string]string{
		filepath.Join(n.dir, "kubelet.kubeconfig"):    "system:node:" + n.Name,
		filepath.Join(n.dir, "kube-proxy.kubeconfig"): "system:kube-proxy",
		n.Path(multusKubeconfig):                      multusUser,
	} {
		if err := c.pki.kubeconfig(path, server, user); err != nil {
			return err
		}
	}
	for _, p := range []string{"loopback", "bridge", "host-local", "macvlan", "portmap", "multus"} {
		if err := copyFile(filepath.Join(c.BinDir, p), filepath.Join(n.Path("/opt/cni/bin"), p), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// startDaemons starts containerd, then kubelet and kube-proxy, in the node's namespaces.
func (n *Node) startDaemons(c *Cluster) error {
	env := []string{"PATH=" + c.BinDir + ":" + os.Getenv("PATH")}
	var err error
	if n.containerd, err = startProc(c.logDir, n.Name+"-containerd", env,
		n.enter(filepath.Join(c.BinDir, "containerd"), "--config", filepath.Join(n.dir, "containerd.toml"))...); err != nil {
		return err
	}
	if err := waitFile(n.ContainerdSocket(), n.containerd); err != nil {
		return err
	}
	if n.kubelet, err = startProc(c.logDir, n.Name+"-kubelet", env,
		n.enter(filepath.Join(c.BinDir, "kubelet"),
			"--config", filepath.Join(n.dir, "kubelet.yaml"),
			"--kubeconfig", filepath.Join(n.dir, "kubelet.kubeconfig"),
			"--hostname-override", n.Name,
			"--node-ip", n.Addr,
			"--v", "1")...); err != nil {
		return err
	}
	n.proxy, err = startProc(c.logDir, n.Name+"-kube-proxy", env,
		n.enter(filepath.Join(c.BinDir, "kube-proxy"), "--config", filepath.Join(n.dir, "kube-proxy.yaml"))...)
	return err
}

func copyFile(src, dst string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return writeFileAtomic(dst, data, mode)
}

// writeFileAtomic writes data to a temporary name beside path and renames it over path: a reader
// sees the old file or the new one, and the new one has mode whatever the old one had.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil { // WriteFile keeps the mode of a leftover tmp
		return err
	}
	return os.Rename(tmp, path)
}
