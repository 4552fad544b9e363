// Command netpool-controller is netpool's IPAM controller: pool status, leak GC, pools from NADs,
// the reclaim of deleted nodes' addresses and idle slices, and EgressRouters. Run it as a Deployment (two
// replicas elect a leader); all its logic lives in package controller, and docs/controller.md
// documents its flags.
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

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/netpool/netpool/controller"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/internal/version"
	"github.com/netpool/netpool/ipam"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "netpool-controller:", err)
		os.Exit(1)
	}
}

// config is what the command line says.
type config struct {
	opts       controller.Options
	kubeconfig string
	logFormat  string
	logLevel   string
	// version asks for the version only: run prints it and starts nothing.
	version bool
}

// parseFlags reads the command line; usage and errors go to out.
func parseFlags(args []string, out io.Writer) (config, error) {
	fs := flag.NewFlagSet("netpool-controller", flag.ContinueOnError)
	fs.SetOutput(out)
	c := config{opts: controller.DefaultOptions()}
	c.opts.BindFlags(fs)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file of the controller's identity; empty: the in-cluster config (the Deployment's ServiceAccount)")
	fs.StringVar(&c.logFormat, "log-format", controller.LogFormatJSON, "log format: json or text")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: "+ipam.LogLevelWords+" (the plugin's log_level words)")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return c, nil
}

// run runs the controller the command line describes; only --version writes to stdout.
func run(args []string, stdout io.Writer) error {
	c, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	if c.version {
		_, err := fmt.Fprintln(stdout, version.Line("netpool-controller"))
		return err
	}
	log, err := controller.NewLogger(os.Stderr, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	c.opts.Logger = log
	cfg, err := kubeclient.Config(c.kubeconfig)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return controller.Run(ctx, cfg, c.opts)
}
