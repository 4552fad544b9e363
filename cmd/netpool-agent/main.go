// Command netpool-agent is the netpool node agent: it serves the netpool CNI plugin's datastore
// kubernetes calls on a unix socket, with a warm API client and cache. Run one per node (a
// DaemonSet); all its logic lives in package agent.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/netpool/netpool/allocator/kubestore"
	"github.com/netpool/netpool/cni-plugin/agent"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/internal/version"
	"github.com/netpool/netpool/ipam"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "netpool-agent:", err)
		os.Exit(1)
	}
}

// run runs the agent the command line describes until SIGINT or SIGTERM; only --version writes
// to stdout, and usage, flag errors and logs go to stderr.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("netpool-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f agent.Flags
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig file of the agent's identity; empty: the in-cluster config (the DaemonSet's ServiceAccount)")
	fs.StringVar(&f.NodeName, "node-name", "", "this node's name, as the installer knows it; the "+agent.NodeNameEnv+" environment variable overrides it")
	fs.StringVar(&f.Socket, "socket", ipam.DefaultAgentSocket, "unix socket the netpool plugin forwards to (the NAD's kubernetes.agent_socket)")
	fs.StringVar(&f.MetricsBindAddress, "metrics-bind-address", "", "address serving /metrics, /healthz and /readyz, such as :9402; empty: off")
	fs.Float64Var(&f.QPS, "qps", kubeclient.DefaultQPS, "API client queries per second")
	fs.IntVar(&f.Burst, "burst", kubeclient.DefaultBurst, "API client burst")
	fs.DurationVar(&f.APITimeout, "api-timeout", kubestore.DefaultAPITimeout, "how long one CNI call retries while the API server does not answer, before failing with CNI error 11")
	fs.DurationVar(&f.CallTimeout, "call-timeout", agent.DefaultCallTimeout, "how long one CNI call may take, whatever lock_timeout its NAD sets; past it the call fails with CNI error 11")
	fs.Func("extra-config-dir", "a directory, besides /etc/cni/net.d and /etc/kubernetes/cni/net.d, that NADs' configuration_path may name (repeatable; mount it into the agent's container: k3s and RKE2 keep whereabouts' flat file under /var/lib/rancher/k3s/agent/etc/cni/net.d)", func(d string) error {
		f.ExtraConfigDirs = append(f.ExtraConfigDirs, d)
		return nil
	})
	fs.Func("extra-log-dir", "a directory, besides /var/log/netpool, that NADs' log_file may name (repeatable; mount it into the agent's container)", func(d string) error {
		f.ExtraLogDirs = append(f.ExtraLogDirs, d)
		return nil
	})
	logFormat := fs.String("log-format", agent.LogFormatJSON, "log format: json or text")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error; info logs every CNI call")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		_, err := fmt.Fprintln(stdout, version.Line("netpool-agent"))
		return err
	}
	log, err := agent.NewLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return agent.Main(ctx, f, os.Getenv, log)
}
