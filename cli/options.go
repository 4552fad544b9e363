package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/internal/scheme"
)

// options are the flags every inspecting command shares: where the allocations live (a cluster,
// found by the usual kubeconfig loading rules, or an embedded bbolt file) and how to print them.
type options struct {
	kubeconfig string
	context    string
	db         string
	output     string
	timeout    time.Duration
	// now is the clock ages are printed against.
	now func() time.Time
}

// defaultTimeout bounds every API request, so an unreachable cluster is an error, not a hang.
const defaultTimeout = 15 * time.Second

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "the kubeconfig context to use (default: its current context)")
	fs.StringVar(&o.db, "db", "", "path to an embedded netpool bbolt file: inspect it instead of a cluster")
	fs.StringVarP(&o.output, "output", "o", string(formatTable), "output format: table, wide, json or yaml")
	fs.DurationVar(&o.timeout, "request-timeout", defaultTimeout, "how long one request to the cluster may take")
}

// embedded reports whether the command works on a bbolt file; giving both a file and cluster
// flags is an error, since the answer would silently come from one of them.
func (o *options) embedded() (bool, error) {
	if o.db == "" {
		return false, nil
	}
	if o.kubeconfig != "" || o.context != "" {
		return false, errors.New("--db selects an embedded store: it cannot be combined with --kubeconfig or --context")
	}
	return true, nil
}

// restConfig loads the cluster's client config the way kubectl does: --kubeconfig, else
// $KUBECONFIG, else ~/.kube/config, else the in-cluster config; --context picks the context.
func (o *options) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load the cluster's client config: %w", err)
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("--request-timeout must be positive, not %s", o.timeout)
	}
	cfg.Timeout = o.timeout
	cfg.UserAgent = "netpoolctl"
	return cfg, nil
}

// kubeClient is an uncached client of the cluster that knows netpool's kinds, Pods, Nodes and
// NADs. It reads live: a CLI's answer must not come from a cache that lags.
func (o *options) kubeClient() (client.Client, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("failed to create a client of %s: %w", cfg.Host, err)
	}
	return c, nil
}
