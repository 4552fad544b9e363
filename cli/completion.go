package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/netpool/netpool/cli/inventory"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// completionTimeout bounds what one completion may spend reading the cluster or the file: a
// shell waits for it on every TAB, and an unreachable cluster must cost a pause, not a hang.
const completionTimeout = 2 * time.Second

// completer lists the values a completion offers, read from the cluster or the --db file.
type completer func(ctx context.Context, opts *options) ([]string, error)

// complete runs fn with the completion timeout and keeps the values that start with toComplete,
// sorted; an error offers nothing (the shell then completes nothing, as kubectl does).
func complete(cmd *cobra.Command, opts *options, fn completer, toComplete string) ([]string, cobra.ShellCompDirective) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	vals, err := fn(ctx, opts)
	if err != nil {
		cobra.CompDebugln("netpoolctl: completion: "+err.Error(), true)
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, v := range vals {
		if strings.HasPrefix(v, toComplete) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeArgs completes the first n positional arguments with fn.
func completeArgs(opts *options, n int, fn completer) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= n {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return complete(cmd, opts, fn, toComplete)
	}
}

// registerCompletion completes cmd's flag with fn.
func registerCompletion(cmd *cobra.Command, opts *options, flag string, fn completer) {
	_ = cmd.RegisterFlagCompletionFunc(flag, func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return complete(cmd, opts, fn, toComplete)
	})
}

// registerRootCompletions completes the flags every command has: -n, --context, -o.
func registerRootCompletions(root *cobra.Command, opts *options) {
	registerCompletion(root, opts, "namespace", completeNamespaces)
	registerCompletion(root, opts, "context", completeContexts)
	_ = root.RegisterFlagCompletionFunc("output", func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []string
		for _, f := range outputFormats {
			if strings.HasPrefix(f, toComplete) {
				out = append(out, f)
			}
		}
		// A format that takes its argument after = is not finished by a space.
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
}

// completeSource opens the source of a completion: the cluster, with requests bounded by the
// completion timeout, or the --db file.
func completeSource(opts *options) (inventory.Source, error) {
	if t, err := opts.timeout(); err != nil || t > completionTimeout {
		o := *opts
		o.overrides.Timeout = completionTimeout.String()
		return o.source()
	}
	return opts.source()
}

// completePools lists the pools' names. In a cluster it lists the IPPools only, not their
// reservations, so it costs one request whatever the cluster holds.
func completePools(ctx context.Context, opts *options) ([]string, error) {
	src, err := completeSource(opts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if c, ok := src.(*inventory.Cluster); ok {
		var list ipamv1.IPPoolList
		if err := c.Client.List(ctx, &list); err != nil {
			return nil, err
		}
		names := make([]string, 0, len(list.Items))
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		return names, nil
	}
	pools, err := src.Pools(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(pools))
	for _, p := range pools {
		names = append(names, p.Name)
	}
	return names, nil
}

// completeNetworks lists the pools' network names.
func completeNetworks(ctx context.Context, opts *options) ([]string, error) {
	src, err := completeSource(opts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if c, ok := src.(*inventory.Cluster); ok {
		var list ipamv1.IPPoolList
		if err := c.Client.List(ctx, &list); err != nil {
			return nil, err
		}
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Spec.NetworkName)
		}
		return names, nil
	}
	pools, err := src.Pools(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range pools {
		names = append(names, p.Network)
	}
	return names, nil
}

// allocationsOf lists the allocations a completion offers from: those of pods in -n's namespace.
func allocationsOf(ctx context.Context, opts *options) ([]inventory.Allocation, error) {
	src, err := completeSource(opts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	as, err := src.Allocations(ctx, "")
	if err != nil {
		return nil, err
	}
	if ns := opts.namespace(); ns != "" {
		as = slices.DeleteFunc(as, func(a inventory.Allocation) bool { return a.Namespace != ns })
	}
	return as, nil
}

// completeAddresses lists the held addresses.
func completeAddresses(ctx context.Context, opts *options) ([]string, error) {
	as, err := allocationsOf(ctx, opts)
	var out []string
	for _, a := range as {
		out = append(out, a.Address.String())
	}
	return out, err
}

// completePods lists the pods that hold addresses, NAMESPACE/NAME (NAME with -n).
func completePods(ctx context.Context, opts *options) ([]string, error) {
	as, err := allocationsOf(ctx, opts)
	var out []string
	for _, a := range as {
		switch {
		case a.PodName == "":
		case opts.namespace() != "":
			out = append(out, a.PodName)
		default:
			out = append(out, a.Pod())
		}
	}
	return out, err
}

// completeNamespaces lists the cluster's namespaces, or the namespaces of the pods a --db file
// records.
func completeNamespaces(ctx context.Context, opts *options) ([]string, error) {
	src, err := completeSource(opts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if c, ok := src.(*inventory.Cluster); ok {
		var list corev1.NamespaceList
		if err := c.Client.List(ctx, &list); err != nil {
			return nil, err
		}
		var names []string
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
		return names, nil
	}
	as, err := src.Allocations(ctx, "")
	var names []string
	for _, a := range as {
		if a.Namespace != "" {
			names = append(names, a.Namespace)
		}
	}
	return names, err
}

// completeContexts lists the kubeconfig's contexts.
func completeContexts(_ context.Context, opts *options) ([]string, error) {
	raw, err := opts.clientConfig().RawConfig()
	if err != nil {
		return nil, err
	}
	var names []string
	for name := range raw.Contexts {
		names = append(names, name)
	}
	return names, nil
}
