package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/internal/scheme"
)

// options are the flags every command shares: where the allocations live (a cluster, reached as
// kubectl reaches it, with kubectl's own flags, or an embedded bbolt file) and how to print them.
//
// The cluster flags are client-go's clientcmd override flags, the set cli-runtime's ConfigFlags
// binds (--kubeconfig, --context, --cluster, --user, -n/--namespace, --as, --as-group, --as-uid,
// -s/--server, --token, --certificate-authority, --client-certificate, --client-key,
// --insecure-skip-tls-verify, --tls-server-name, --request-timeout...), bound from clientcmd
// directly: ConfigFlags' package also links cli-runtime's resource builder and kustomize, which
// netpoolctl does not use.
type options struct {
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
	db         string
	print      printFlags
	// fs is the root's persistent flag set, to tell a flag given from its default.
	fs *pflag.FlagSet
	// clusterFlags are the flags that select or authenticate to a cluster: giving one with --db is
	// an error, since the answer would silently come from the file. -n and --request-timeout mean
	// the same on both sources.
	clusterFlags []string
	// now is the clock ages are printed against.
	now func() time.Time
}

// defaultTimeout bounds every API request, so an unreachable cluster is an error, not a hang
// (kubectl's default, 0, waits for ever).
const defaultTimeout = 15 * time.Second

func (o *options) addFlags(fs *pflag.FlagSet) {
	o.fs = fs
	fs.StringVar(&o.kubeconfig, clientcmd.RecommendedConfigPathFlag, "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	names := clientcmd.RecommendedConfigOverrideFlags("")
	names.ContextOverrideFlags.Namespace.ShortName = "n"
	names.ContextOverrideFlags.Namespace.Description = "only the allocations of pods in this namespace (default: every namespace; pools are cluster-scoped and always listed)"
	names.ClusterOverrideFlags.APIServer.ShortName = "s"
	names.Timeout.Default = defaultTimeout.String()
	names.Timeout.Description = "how long one request to the cluster (or the wait for a --db file's lock) may take, e.g. 5s, 1m"
	clientcmd.BindOverrideFlags(&o.overrides, fs, names)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != names.ContextOverrideFlags.Namespace.LongName && f.Name != names.Timeout.LongName {
			o.clusterFlags = append(o.clusterFlags, f.Name)
		}
	})
	fs.StringVar(&o.db, "db", "", "path to an embedded netpool bbolt file: inspect it instead of a cluster")
	o.print.addFlags(fs)
}

// namespace is -n, "" for every namespace.
func (o *options) namespace() string { return o.overrides.Context.Namespace }

// timeout is --request-timeout, which must be positive.
func (o *options) timeout() (time.Duration, error) {
	s := o.overrides.Timeout
	if s == "" {
		return defaultTimeout, nil
	}
	if !strings.ContainsAny(s, "nsuµmh") {
		s += "s" // kubectl takes a bare number as seconds
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("--request-timeout %q: want a duration such as 15s or 1m", o.overrides.Timeout)
	}
	if d <= 0 {
		return 0, fmt.Errorf("--request-timeout must be positive, not %s", o.overrides.Timeout)
	}
	return d, nil
}

// embedded reports whether the command works on a bbolt file; giving both a file and cluster
// flags is an error, since the answer would silently come from one of them.
func (o *options) embedded() (bool, error) {
	if o.db == "" {
		return false, nil
	}
	var given []string
	for _, name := range o.clusterFlags {
		if f := o.fs.Lookup(name); f != nil && f.Changed {
			given = append(given, "--"+name)
		}
	}
	if len(given) > 0 {
		return false, fmt.Errorf("--db selects an embedded store: it cannot be combined with %s", strings.Join(given, ", "))
	}
	return true, nil
}

// clientConfig is the kubeconfig as kubectl loads it: --kubeconfig, else $KUBECONFIG, else
// ~/.kube/config, else the in-cluster config, with the override flags applied.
func (o *options) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &o.overrides)
}

// restConfig is the cluster's client config.
func (o *options) restConfig() (*rest.Config, error) {
	timeout, err := o.timeout()
	if err != nil {
		return nil, err
	}
	cfg, err := o.clientConfig().ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("no cluster to talk to: no kubeconfig was found ($KUBECONFIG, ~/.kube/config) and this is not a pod; give --kubeconfig, --server, or --db for an embedded store")
		}
		return nil, fmt.Errorf("failed to load the cluster's client config: %w", err)
	}
	cfg.Timeout = timeout
	cfg.UserAgent = "netpoolctl"
	return cfg, nil
}

// kubeClient is an uncached client of the cluster that knows netpool's kinds, Pods, Nodes and
// NADs. It reads live: a CLI's answer must not come from a cache that lags.
func (o *options) kubeClient() (kubeclient.Client, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	c, err := kubeclient.New(cfg, s)
	if err != nil {
		return nil, err
	}
	return c, nil
}
