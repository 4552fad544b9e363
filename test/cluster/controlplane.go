package cluster

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// Identities in the apiserver's token file. The components use the users the apiserver's bootstrap
// RBAC binds (system:kube-scheduler, system:kube-controller-manager, system:kube-proxy), kubelets
// system:node:<name> in system:nodes (the Node authorizer and NodeRestriction apply to them).
const (
	adminUser      = "netpool-test-admin"
	multusUser     = "netpool-test-multus"
	schedulerUser  = "system:kube-scheduler"
	controllerUser = "system:kube-controller-manager"
	proxyUser      = "system:kube-proxy"
	// ViewerUser is in the group ViewerGroup, which nothing grants anything: a test binds
	// netpool's read-only ClusterRole to it, as the README tells an operator to.
	ViewerUser  = "netpool-test-viewer"
	ViewerGroup = "netpool-viewers"
)

func identities(nodes int) []identity {
	ids := []identity{
		{user: adminUser, groups: []string{"system:masters"}},
		{user: multusUser},
		{user: schedulerUser},
		{user: controllerUser},
		{user: proxyUser},
		{user: ViewerUser, groups: []string{ViewerGroup}},
	}
	for i := 1; i <= nodes; i++ {
		ids = append(ids, identity{user: "system:node:" + nodeName(i), groups: []string{"system:nodes"}})
	}
	return ids
}

func (c *Cluster) startEtcd() error {
	url := func(port int) string { return "http://" + hostAddr + ":" + strconv.Itoa(port) }
	var err error
	c.etcd, err = startProc(c.logDir, "etcd", nil, filepath.Join(c.AssetsDir, "etcd"),
		"--name", "default",
		"--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", url(2379), "--advertise-client-urls", url(2379),
		"--listen-peer-urls", url(2380), "--initial-advertise-peer-urls", url(2380),
		"--initial-cluster", "default="+url(2380),
		// A test cluster's data need not survive a power cut; fsync is most of etcd's latency here.
		"--unsafe-no-fsync")
	return err
}

func (c *Cluster) startAPIServer() error {
	var err error
	c.apiserver, err = startProc(c.logDir, "kube-apiserver", nil, filepath.Join(c.AssetsDir, "kube-apiserver"),
		"--etcd-servers", "http://"+hostAddr+":2379",
		"--bind-address", hostAddr, "--advertise-address", hostAddr, "--secure-port", strconv.Itoa(apiPort),
		"--cert-dir", filepath.Join(c.dir, "apiserver"),
		"--tls-cert-file", c.pki.certFile, "--tls-private-key-file", c.pki.keyFile,
		"--client-ca-file", c.pki.caFile,
		"--token-auth-file", c.pki.tokenFile,
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", c.pki.saPub,
		"--service-account-signing-key-file", c.pki.saKey,
		"--service-cluster-ip-range", serviceCIDR,
		"--allow-privileged",
		"--kubelet-preferred-address-types", "InternalIP",
		"--profiling=false")
	return err
}

func (c *Cluster) startControllers() error {
	cmKubeconfig := filepath.Join(c.dir, "controller-manager.kubeconfig")
	schedKubeconfig := filepath.Join(c.dir, "scheduler.kubeconfig")
	server := fmt.Sprintf("https://%s:%d", hostAddr, apiPort)
	if err := c.pki.kubeconfig(cmKubeconfig, server, controllerUser); err != nil {
		return err
	}
	if err := c.pki.kubeconfig(schedKubeconfig, server, schedulerUser); err != nil {
		return err
	}
	var err error
	c.controllerManager, err = startProc(c.logDir, "kube-controller-manager", nil, filepath.Join(c.BinDir, "kube-controller-manager"),
		"--kubeconfig", cmKubeconfig,
		"--authentication-kubeconfig", cmKubeconfig, "--authorization-kubeconfig", cmKubeconfig,
		"--bind-address", hostAddr,
		"--service-account-private-key-file", c.pki.saKey,
		"--root-ca-file", c.pki.caFile,
		"--use-service-account-credentials",
		"--service-cluster-ip-range", serviceCIDR,
		"--cluster-cidr", podCIDR,
		"--leader-elect=false",
		// A node that stops reporting is marked NotReady within 20 s (the drain and restart tests).
		"--node-monitor-grace-period", "20s")
	if err != nil {
		return err
	}
	c.scheduler, err = startProc(c.logDir, "kube-scheduler", nil, filepath.Join(c.BinDir, "kube-scheduler"),
		"--kubeconfig", schedKubeconfig,
		"--authentication-kubeconfig", schedKubeconfig, "--authorization-kubeconfig", schedKubeconfig,
		"--bind-address", hostAddr,
		"--leader-elect=false")
	return err
}

// UserKubeconfig writes a kubeconfig for one of the cluster's users (ViewerUser) and returns its path.
func (c *Cluster) UserKubeconfig(user string) (string, error) {
	path := filepath.Join(c.dir, "users", user+".kubeconfig")
	return path, c.pki.kubeconfig(path, fmt.Sprintf("https://%s:%d", hostAddr, apiPort), user)
}
