package cluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MultusThickImage is the image of the Multus thick DaemonSet: multus-daemon, multus-shim (both
// hack/cluster-binaries.sh's) and cni-install, which copies the shim onto the node.
const MultusThickImage = "localhost/netpool-test/multus-thick:1"

// MultusThickNamespace and MultusThickDaemonSet name the DaemonSet of multus-thick.yaml.
const (
	MultusThickNamespace = "kube-system"
	MultusThickDaemonSet = "multus-thick"
)

// multusConfFile is the node's CNI configuration, first in its directory: the harness writes the
// thin plugin's, the thick daemon its own.
const multusConfFile = "00-multus.conf"

// podNetworkFile is the node's primary network configuration while Multus runs thick, which the
// daemon names as its cluster network in its 00-multus.conf; thin has it inline.
const podNetworkFile = "10-podnet.conf"

// thickPrimaryConfig is the node's primary network configuration under Multus thick: the pod
// bridge alone, a single-plugin .conf, not thin's conflist with portmap. Multus v4.2.2 loads a
// .conflist cluster network through its typed structs and keeps only what they model (type,
// ipam.type, capabilities) for the DEL it runs from its cache; bridge's DEL then fails with "no IP
// ranges specified" and the pod's eth0 address stays in host-local's store (multus-cni issue 1449,
// fixed after v4.2.2), which this cluster showed. A .conf is kept as it was written.
func (n *Node) thickPrimaryConfig() string {
	return fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q,
 %s}
`, PodNetwork, n.podBridge())
}

// multusSocketDir is the thick daemon's socket directory on the node (the shim's default).
const multusSocketDir = "/run/multus"

//go:embed multus-thick.yaml
var multusThickManifest string

// UseMultusThick switches every node's pod network from the Multus thin plugin to Multus thick: it
// writes each node's primary network configuration (the pod bridge thin delegates eth0 to),
// imports the thick image and applies multus-thick.yaml, whose DaemonSet installs multus-shim and
// runs multus-daemon on every node; it returns once the daemon is ready on every node and has
// written its 00-multus.conf there. UseMultusThin undoes it; call it whatever this returned.
func (c *Cluster) UseMultusThick(ctx context.Context) error {
	archive, err := c.buildThickImage()
	if err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if err := n.importImages(filepath.Join(c.BinDir, "ctr"), []string{archive}); err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(n.Path("/etc/cni/net.d"), podNetworkFile), []byte(n.thickPrimaryConfig()), 0o644); err != nil {
			return err
		}
	}
	objs, err := DecodeYAMLBytes([]byte(strings.ReplaceAll(multusThickManifest, "IMAGE", MultusThickImage)))
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, objs); err != nil {
		return err
	}
	c.say("multus-thick.yaml applied")
	err = c.wait(ctx, 3*time.Minute, "the multus-thick DaemonSet ready on every node", func(ctx context.Context) error {
		ds, err := c.Client.AppsV1().DaemonSets(MultusThickNamespace).Get(ctx, MultusThickDaemonSet, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s := ds.Status
		if s.ObservedGeneration < ds.Generation || s.DesiredNumberScheduled != int32(len(c.Nodes)) || s.NumberReady != s.DesiredNumberScheduled {
			return fmt.Errorf("desired %d, ready %d: %w", s.DesiredNumberScheduled, s.NumberReady, c.thickPodsState(ctx))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.wait(ctx, time.Minute, "the thick daemon's 00-multus.conf on every node", func(context.Context) error {
		for _, n := range c.Nodes {
			data, err := os.ReadFile(filepath.Join(n.Path("/etc/cni/net.d"), multusConfFile))
			if err != nil {
				return err
			}
			if !strings.Contains(string(data), `"type":"multus-shim"`) {
				return fmt.Errorf("%s: %s is not the daemon's yet: %s", n.Name, multusConfFile, data)
			}
		}
		return nil
	})
}

// thickPodsState says why the DaemonSet's pods are not ready, for the error of a wait.
func (c *Cluster) thickPodsState(ctx context.Context) error {
	pods, err := c.Client.CoreV1().Pods(MultusThickNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + MultusThickDaemonSet})
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "%s on %s: %s, init %v, containers %v; ", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
	}
	return errors.New(b.String())
}

// UseMultusThin switches the nodes back to the Multus thin plugin as Start configured them: it
// deletes multus-thick.yaml's objects and waits until the daemon's pods are gone (the daemon
// removes its 00-multus.conf and socket on SIGTERM), then on every node writes the thin
// 00-multus.conf again and removes what thick added: the primary network configuration,
// multus-shim, the socket directory and the image. Pods started under thick must be gone first:
// their DEL needs the daemon.
func (c *Cluster) UseMultusThin(ctx context.Context) error {
	objs, err := DecodeYAMLBytes([]byte(multusThickManifest))
	if err != nil {
		return err
	}
	var errs []error
	for i, j := 0, len(objs)-1; i < j; i, j = i+1, j-1 {
		objs[i], objs[j] = objs[j], objs[i] // the DaemonSet first, its ServiceAccount last
	}
	if err := c.Delete(ctx, objs); err != nil {
		errs = append(errs, err)
	}
	err = c.wait(ctx, 2*time.Minute, "the multus-thick DaemonSet and its pods gone", func(ctx context.Context) error {
		if _, err := c.Client.AppsV1().DaemonSets(MultusThickNamespace).Get(ctx, MultusThickDaemonSet, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the DaemonSet is still there (%v)", err)
		}
		pods, err := c.Client.CoreV1().Pods(MultusThickNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + MultusThickDaemonSet})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left, %s on %s", len(pods.Items), pods.Items[0].Name, pods.Items[0].Spec.NodeName)
		}
		return nil
	})
	if err != nil {
		// A daemon still running could remove the thin configuration written now.
		return errors.Join(append(errs, err)...)
	}
	for _, n := range c.Nodes {
		errs = append(errs, n.writeThinConfig())
		for _, p := range []string{
			filepath.Join(n.Path("/etc/cni/net.d"), podNetworkFile),
			filepath.Join(n.Path("/opt/cni/bin"), "multus-shim"),
			n.Path(multusSocketDir),
		} {
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
		}
		if _, err := run(filepath.Join(c.BinDir, "ctr"), "--address", n.ContainerdSocket(), "-n", "k8s.io", "images", "rm", MultusThickImage); err != nil {
			errs = append(errs, fmt.Errorf("removing %s from %s: %w", MultusThickImage, n.Name, err))
		}
	}
	c.say("back to Multus thin")
	return errors.Join(errs...)
}

// buildThickImage writes the archive of MultusThickImage: /multus-daemon (its entrypoint),
// /multus-shim and /cni-install, an /etc/passwd (the daemon asks os/user whether it runs as root,
// which without cgo reads /etc/passwd, else wants $USER and $HOME) and /var/run linked to /run,
// as on a Linux host (the runtime names network namespaces /var/run/netns/..., and the daemon
// opens them itself).
func (c *Cluster) buildThickImage() (string, error) {
	dir := filepath.Join(c.dir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	install, err := goBuild(c.opts.Root, dir, "./test/cluster/images/cni-install")
	if err != nil {
		return "", err
	}
	archive := filepath.Join(dir, "multus-thick.tar")
	err = layerImage([]imageFile{
		{name: "/multus-daemon", src: filepath.Join(c.BinDir, "multus-daemon"), mode: 0o755},
		{name: "/multus-shim", src: filepath.Join(c.BinDir, "multus-shim"), mode: 0o755},
		{name: "/cni-install", src: install, mode: 0o755},
		{name: "/etc", mode: 0o755},
		{name: "/etc/passwd", data: []byte("root:x:0:0:root:/root:/sbin/nologin\n"), mode: 0o644},
		{name: "/run", mode: 0o755},
		{name: "/var", mode: 0o755},
		{name: "/var/run", link: "/run"},
	}, []string{"/multus-daemon"}, MultusThickImage, archive)
	return archive, err
}
