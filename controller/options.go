package controller

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netpool/netpool/controller/internal/egressrouter"
	"github.com/netpool/netpool/controller/internal/poolstatus"
	"github.com/netpool/netpool/internal/gcpolicy"
	"github.com/netpool/netpool/internal/kubeclient"
)

// Defaults of Options, which are also the flags' defaults.
const (
	DefaultMetricsBindAddress     = ":8080"
	DefaultHealthProbeBindAddress = ":8081"
	DefaultLeaderElectionID       = "netpool-controller"
	DefaultLeaderElectionNS       = "netpool-system"
	DefaultLeaseDuration          = 15 * time.Second
	DefaultRenewDeadline          = 10 * time.Second
	DefaultRetryPeriod            = 2 * time.Second

	// DefaultGCGrace is how old a reservation must be before GC may release it: the GC policy's
	// default, which netpoolctl leaks uses too.
	DefaultGCGrace = gcpolicy.DefaultGrace
	// DefaultSweepInterval is how often every reservation is looked at again, for what no pod event
	// announced.
	DefaultSweepInterval = 10 * time.Minute
	// DefaultGCWorkers is how many reservations GC judges (and releases) at once.
	DefaultGCWorkers = 8
	// DefaultSliceGrace is how long a slice must stay without reservations of its node before it
	// goes back to the pool. The agent gives back idle blocks itself while it holds another; this
	// catches the rest (a node's last block, an agent that crashed) without churning busy blocks.
	DefaultSliceGrace = 10 * time.Minute
	// DefaultPoolStatusInterval is the shortest time between two status writes of one pool, so a
	// burst of allocations costs a few writes a second, not one per allocation.
	DefaultPoolStatusInterval = time.Second
	// DefaultPoolStatusFanout is how many watch deliveries a second one pool's status writes may
	// cost the agents together (every agent watches IPPools): the interval stretches above 200 nodes.
	DefaultPoolStatusFanout = poolstatus.DefaultFanout
	// DefaultEgressRouterImage is the image of EgressRouter pods, which only hold the network
	// namespace in which the kernel does the NAT.
	DefaultEgressRouterImage = egressrouter.DefaultImage
)

// Options configure the controller. The zero value is not valid: start from DefaultOptions.
type Options struct {
	// MetricsBindAddress serves /metrics; "0" turns it off.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" turns it off.
	HealthProbeBindAddress string

	// LeaderElection makes only one replica reconcile at a time, through a Lease named
	// LeaderElectionID in LeaderElectionNamespace.
	LeaderElection          bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration
	// ReleaseLeaseOnStop gives the Lease up when the manager stops, so a rolling update hands over
	// at once instead of after LeaseDuration. It is not a flag; tests turn it off to act as a crash.
	ReleaseLeaseOnStop bool

	// QPS and Burst are the API client's rate limit.
	QPS   float64
	Burst int

	// GCGrace: reservations younger than this are never released.
	GCGrace time.Duration
	// SweepInterval is how often every reservation is judged again.
	SweepInterval time.Duration
	// GCWorkers is how many reservations are judged at once.
	GCWorkers int
	// DryRun reports leaks (Events, metrics, logs) without releasing them.
	DryRun bool
	// SliceGrace is how long a slice stays empty before it goes back to its pool.
	SliceGrace time.Duration
	// PoolStatusInterval is the shortest time between two status writes of one pool.
	PoolStatusInterval time.Duration
	// PoolStatusFanout stretches PoolStatusInterval so that one pool's status writes cost at most
	// this many watch deliveries a second across the nodes' agents; 0 turns the stretch off.
	PoolStatusFanout float64

	// EgressRouterImage is the image of EgressRouter pods, which only hold the network namespace.
	EgressRouterImage string

	// Logger receives the manager's structured logs; logr.Discard() when unset.
	Logger logr.Logger
	// Registerer receives netpool's own metrics; controller-runtime's registry (served on
	// /metrics) when nil. Tests that run several managers give each its own registry.
	Registerer prometheus.Registerer
	// Now is every reconciler's clock (reservation ages, grace periods, status intervals);
	// time.Now when nil. It is not a flag: tests move it to age objects past a grace period.
	Now func() time.Time
}

// DefaultOptions returns the options with every default applied.
func DefaultOptions() Options {
	return Options{
		MetricsBindAddress:      DefaultMetricsBindAddress,
		HealthProbeBindAddress:  DefaultHealthProbeBindAddress,
		LeaderElection:          true,
		LeaderElectionID:        DefaultLeaderElectionID,
		LeaderElectionNamespace: DefaultLeaderElectionNS,
		LeaseDuration:           DefaultLeaseDuration,
		RenewDeadline:           DefaultRenewDeadline,
		RetryPeriod:             DefaultRetryPeriod,
		ReleaseLeaseOnStop:      true,
		QPS:                     kubeclient.DefaultQPS,
		Burst:                   kubeclient.DefaultBurst,
		GCGrace:                 DefaultGCGrace,
		SweepInterval:           DefaultSweepInterval,
		GCWorkers:               DefaultGCWorkers,
		SliceGrace:              DefaultSliceGrace,
		PoolStatusInterval:      DefaultPoolStatusInterval,
		PoolStatusFanout:        DefaultPoolStatusFanout,
		EgressRouterImage:       DefaultEgressRouterImage,
	}
}

// BindFlags registers one flag per option on fs, with o's values as defaults; parsing fs then
// writes into o.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address serving /metrics; 0 turns it off")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "address serving /healthz and /readyz; 0 turns it off")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "elect one active replica through a Lease; turn off only when running a single replica")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "name of the leader election Lease")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "namespace of the leader election Lease")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration, "how long followers wait before taking over a Lease that is not renewed")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline, "how long the leader retries renewing before it gives up leadership (less than the lease duration)")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod, "how often leader election is retried")
	fs.Float64Var(&o.QPS, "kube-api-qps", o.QPS, "API client queries per second (client-go's default is 5)")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "API client burst (client-go's default is 10)")
	fs.DurationVar(&o.GCGrace, "gc-grace", o.GCGrace, "reservations younger than this are never released")
	fs.DurationVar(&o.SweepInterval, "gc-sweep-interval", o.SweepInterval, "how often every reservation is judged again, beyond pod events")
	fs.IntVar(&o.GCWorkers, "gc-workers", o.GCWorkers, "how many reservations are judged (and released) at once")
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun, "report leaked reservations (Events, metrics, logs) without releasing them")
	fs.DurationVar(&o.SliceGrace, "slice-grace", o.SliceGrace, "how long a slice stays without reservations of its node before it goes back to its pool")
	fs.DurationVar(&o.PoolStatusInterval, "pool-status-interval", o.PoolStatusInterval, "shortest time between two status writes of one pool")
	fs.Float64Var(&o.PoolStatusFanout, "pool-status-fanout", o.PoolStatusFanout, "most watch deliveries a second one pool's status writes may cost the nodes' agents together (each write reaches every node); stretches --pool-status-interval in a large cluster, 0 turns that off")
	fs.StringVar(&o.EgressRouterImage, "egress-router-image", o.EgressRouterImage, "image of EgressRouter pods (it only holds the pod's network namespace)")
}

// Validate reports the first option that cannot work, naming the flag and the value.
func (o *Options) Validate() error {
	var errs []error
	positive := []struct {
		flag  string
		value time.Duration
	}{
		{"gc-grace", o.GCGrace},
		{"gc-sweep-interval", o.SweepInterval},
		{"slice-grace", o.SliceGrace},
		{"pool-status-interval", o.PoolStatusInterval},
	}
	if o.LeaderElection {
		positive = append(positive, []struct {
			flag  string
			value time.Duration
		}{
			{"leader-election-lease-duration", o.LeaseDuration},
			{"leader-election-renew-deadline", o.RenewDeadline},
			{"leader-election-retry-period", o.RetryPeriod},
		}...)
		if o.LeaderElectionID == "" {
			errs = append(errs, errors.New("--leader-election-id must not be empty"))
		}
		if o.LeaderElectionNamespace == "" {
			errs = append(errs, errors.New("--leader-election-namespace must not be empty"))
		}
		if o.RenewDeadline >= o.LeaseDuration {
			errs = append(errs, fmt.Errorf("--leader-election-renew-deadline %s must be less than --leader-election-lease-duration %s", o.RenewDeadline, o.LeaseDuration))
		}
	}
	for _, p := range positive {
		if p.value <= 0 {
			errs = append(errs, fmt.Errorf("--%s %s must be positive", p.flag, p.value))
		}
	}
	if o.QPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps %v must be positive", o.QPS))
	}
	if o.Burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst %d must be at least 1", o.Burst))
	}
	if o.EgressRouterImage == "" {
		errs = append(errs, errors.New("--egress-router-image must not be empty"))
	}
	if !(o.PoolStatusFanout >= 0) || math.IsInf(o.PoolStatusFanout, 1) {
		errs = append(errs, fmt.Errorf("--pool-status-fanout %v must be a finite number, 0 or more", o.PoolStatusFanout))
	}
	if o.GCWorkers < 1 {
		errs = append(errs, fmt.Errorf("--gc-workers %d must be at least 1", o.GCWorkers))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid options: %w", err)
	}
	return nil
}
