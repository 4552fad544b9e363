// Command netpool-agent is the netpool node agent: it serves the netpool CNI plugin's datastore
// kubernetes calls on a unix socket, with a warm API client and cache. Run one per node (a
// DaemonSet); all its logic lives in package agent.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/netpool/netpool/allocator/kubestore"
	"github.com/netpool/netpool/cni-plugin/agent"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/ipam"
)

func main() {
	var f agent.Flags
	flag.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig file of the agent's identity; empty: the in-cluster config (the DaemonSet's ServiceAccount)")
	flag.StringVar(&f.NodeName, "node-name", "", "this node's name, as the installer knows it; the "+agent.NodeNameEnv+" environment variable overrides it")
	flag.StringVar(&f.Socket, "socket", ipam.DefaultAgentSocket, "unix socket the netpool plugin forwards to (the NAD's kubernetes.agent_socket)")
	flag.StringVar(&f.MetricsBindAddress, "metrics-bind-address", "", "address serving /metrics, /healthz and /readyz, such as :9402; empty: off")
	flag.Float64Var(&f.QPS, "qps", kubeclient.DefaultQPS, "API client queries per second")
	flag.IntVar(&f.Burst, "burst", kubeclient.DefaultBurst, "API client burst")
	flag.DurationVar(&f.APITimeout, "api-timeout", kubestore.DefaultAPITimeout, "how long one CNI call retries while the API server does not answer, before failing with CNI error 11")
	logFormat := flag.String("log-format", agent.LogFormatJSON, "log format: json or text")
	logLevel := flag.String("log-level", "info", "log level: debug, info, warn or error; info logs every CNI call")
	flag.DurationVar(&f.CallTimeout, "call-timeout", agent.DefaultCallTimeout, "how long one CNI call may take, whatever lock_timeout its NAD sets; past it the call fails with CNI error 11")
	flag.Parse()
	log, err := agent.NewLogger(os.Stderr, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "netpool-agent:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Main(ctx, f, os.Getenv, log); err != nil {
		fmt.Fprintln(os.Stderr, "netpool-agent:", err)
		os.Exit(1)
	}
}
