package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/kubestore"
	"github.com/netpool/netpool/cni-plugin/agentproto"
	"github.com/netpool/netpool/cni-plugin/ipamplugin"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/ipam"
)

// Defaults of Options, which are also the flags' defaults.
const (
	// DefaultCallTimeout bounds each forwarded call, whatever lock_timeout its NAD sets: the API
	// work's own bound (kubestore.DefaultAPITimeout) plus the rollback. The plugin waits at least
	// 2*lock_timeout+5s (25 s with the default), so the agent's answer, code 11, comes first.
	DefaultCallTimeout = 15 * time.Second
	// shutdownTimeout bounds the metrics server's graceful stop.
	shutdownTimeout = 5 * time.Second
)

// NodeNameEnv overrides the configured node name.
const NodeNameEnv = "NODENAME"

// Options configure an Agent.
type Options struct {
	// NodeName is this node's name (see NodeName for the override).
	NodeName string
	// Socket is the unix socket the plugin forwards to.
	Socket string
	// MetricsBindAddress serves /metrics, /healthz and /readyz over HTTP when not empty.
	MetricsBindAddress string
	// APITimeout bounds each call's API work while the API server does not answer (kubestore).
	APITimeout time.Duration
	// Log receives the agent's own logs and the logs of calls whose config names no log_file.
	Log *slog.Logger
	// Stderr is where calls without a log_file log; os.Stderr when nil.
	Stderr io.Writer
	// CallTimeout bounds each forwarded call; DefaultCallTimeout when 0.
	CallTimeout time.Duration
	// ConfigDirs confine configuration_path, LogDirs confine log_file; DefaultConfigDirs and
	// DefaultLogDir when empty.
	ConfigDirs []string
	LogDirs    []string
}

// NodeName returns the node identity: the NODENAME environment variable when set, else configured.
func NodeName(configured string, getenv func(string) string) (string, error) {
	name := configured
	if env := getenv(NodeNameEnv); env != "" {
		name = env
	}
	if name == "" {
		return "", fmt.Errorf("no node name: set --node-name or the %s environment variable", NodeNameEnv)
	}
	return name, nil
}

// UserAgent names the agent's requests in the API server's audit log.
const UserAgent = "netpool-agent"

// clientConfig loads the API client config of f.Kubeconfig, or the in-cluster config (the
// DaemonSet's ServiceAccount) when it is empty, with f's rate limits.
func clientConfig(f Flags) (*rest.Config, error) {
	cfg, err := kubeclient.Config(f.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(f.QPS), f.Burst
	cfg.UserAgent = UserAgent
	return cfg, nil
}

// Flags are the agent's command-line settings.
type Flags struct {
	Kubeconfig         string
	NodeName           string
	Socket             string
	MetricsBindAddress string
	QPS                float64
	Burst              int
	APITimeout         time.Duration
	CallTimeout        time.Duration
	// ExtraConfigDirs and ExtraLogDirs are served besides DefaultConfigDirs and DefaultLogDir.
	ExtraConfigDirs []string
	ExtraLogDirs    []string
}

// Main runs the agent that f describes until ctx ends: the node name (NODENAME from getenv wins
// over f.NodeName), the API client config, then Run.
func Main(ctx context.Context, f Flags, getenv func(string) string, log *slog.Logger) error {
	// controller-runtime logs (cache, client warnings) go where the agent's own logs go.
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	node, err := NodeName(f.NodeName, getenv)
	if err != nil {
		return err
	}
	configDirs, logDirs, err := f.Dirs()
	if err != nil {
		return err
	}
	cfg, err := clientConfig(f)
	if err != nil {
		return err
	}
	a, err := New(cfg, Options{NodeName: node, Socket: f.Socket, MetricsBindAddress: f.MetricsBindAddress,
		APITimeout: f.APITimeout, CallTimeout: f.CallTimeout, Log: log, ConfigDirs: configDirs, LogDirs: logDirs})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// Agent serves the plugin's forwarded calls for one node.
type Agent struct {
	opts    Options
	log     *slog.Logger
	store   *kubestore.Store
	ready   chan struct{}
	metrics *metrics
}

// New returns an Agent over the API server cfg points at. Run starts it.
func New(cfg *rest.Config, opts Options) (*Agent, error) {
	if opts.Socket == "" {
		opts.Socket = ipam.DefaultAgentSocket
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if len(opts.ConfigDirs) == 0 {
		opts.ConfigDirs = DefaultConfigDirs
	}
	if len(opts.LogDirs) == 0 {
		opts.LogDirs = []string{DefaultLogDir}
	}
	// Calls run concurrently and each logs through its own handler: one lock per write keeps
	// their lines whole, whatever the writer.
	opts.Stderr = &lockedWriter{w: opts.Stderr}
	log := opts.Log.With("node", opts.NodeName)
	store, err := kubestore.New(cfg, kubestore.Options{NodeName: opts.NodeName, APITimeout: opts.APITimeout, Log: log})
	if err != nil {
		return nil, err
	}
	return &Agent{opts: opts, log: log, store: store, ready: make(chan struct{}), metrics: newMetrics()}, nil
}

// Store returns the agent's Kubernetes store.
func (a *Agent) Store() *kubestore.Store { return a.store }

// Ready is closed once the agent serves its socket.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Run syncs the cache, then serves the socket until ctx ends. A socket file left by an agent that
// died is replaced. On shutdown the socket stops accepting, calls in flight finish, and the socket
// file is removed.
func (a *Agent) Run(ctx context.Context) error {
	a.log.Info("Starting netpool agent", "socket", a.opts.Socket)
	var metricsSrv *http.Server
	if a.opts.MetricsBindAddress != "" {
		ln, err := net.Listen("tcp", a.opts.MetricsBindAddress)
		if err != nil {
			return fmt.Errorf("failed to listen on the metrics address: %w", err)
		}
		metricsSrv = &http.Server{Handler: a.httpHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := metricsSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("Serving metrics failed", "err", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
			defer cancel()
			_ = metricsSrv.Shutdown(sctx) // the agent is stopping; a slow scrape is cut off
		}()
	}
	if err := a.store.Start(ctx); err != nil {
		return err
	}
	ln, err := agentproto.Listen(a.opts.Socket)
	if err != nil {
		return err
	}
	close(a.ready)
	a.log.Info("Serving", "socket", a.opts.Socket)
	err = (&agentproto.Server{Handler: a.Handle, Log: a.log}).Serve(ctx, ln)
	// The cooling addresses not yet written behind go to their slices now, so that the agent's
	// next life (a rolling update) passes over them too.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if ferr := a.store.FlushCooling(fctx); ferr != nil {
		a.log.Error("Cooling addresses not recorded before stopping", "err", ferr)
	}
	a.log.Info("Stopped netpool agent", "socket", a.opts.Socket)
	return err
}

// Handle runs one forwarded call through the plugin's verbs over the shared store.
func (a *Agent) Handle(ctx context.Context, req *agentproto.Request) *agentproto.Response {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, a.opts.CallTimeout)
	defer cancel()
	var out bytes.Buffer
	p := &ipamplugin.Plugin{Context: ctx, ReadFile: a.readConfig, OpenLog: a.openLog, OpenStore: a.openStore, Stdout: &out, Stderr: a.opts.Stderr}
	f := p.Funcs()
	verbs := map[string]func(*skel.CmdArgs) error{
		agentproto.VerbAdd: f.Add, agentproto.VerbDel: f.Del, agentproto.VerbCheck: f.Check,
		agentproto.VerbGC: f.GC, agentproto.VerbStatus: f.Status,
	}
	verb := verbs[req.Verb]
	if verb == nil {
		resp := &agentproto.Response{Error: &agentproto.Error{Code: types.ErrInternal, Msg: fmt.Sprintf("netpool agent: unknown verb %q", req.Verb)}}
		a.logCall(req, resp, time.Since(start))
		return resp
	}
	err := verb(&skel.CmdArgs{
		ContainerID: req.ContainerID, Netns: req.Netns, IfName: req.IfName, Args: req.Args,
		Path: req.Path, NetnsOverride: req.NetnsOverride, StdinData: req.Stdin,
	})
	resp := &agentproto.Response{Stdout: out.Bytes()}
	code := uint(0)
	if err != nil {
		var e *types.Error
		if !errors.As(err, &e) {
			e = types.NewError(types.ErrInternal, err.Error(), "")
		}
		resp = &agentproto.Response{Error: &agentproto.Error{Code: e.Code, Msg: e.Msg, Details: e.Details}}
		code = e.Code
	}
	took := time.Since(start)
	a.metrics.observe(req.Verb, code, took)
	a.logCall(req, resp, took)
	return resp
}

// openStore gives each call the shared store, bound to its config. The agent serves datastore
// kubernetes only: it never opens a bbolt file on a forwarded call's say-so.
func (a *Agent) openStore(c *ipam.Config) (allocator.Store, *ipam.Config, error) {
	if c.Datastore != ipam.DatastoreKubernetes {
		return nil, nil, fmt.Errorf("%w: datastore %q: the netpool agent serves datastore %q only",
			ipam.ErrInvalidConfig, c.Datastore, ipam.DatastoreKubernetes)
	}
	return a.store.Bind(c)
}

func (a *Agent) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{a.metrics.registry, ctrlmetrics.Registry}, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-a.ready:
			_, _ = io.WriteString(w, "ok")
		default:
			http.Error(w, "cache not synced", http.StatusServiceUnavailable)
		}
	})
	return mux
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// metrics are the agent's own Prometheus metrics, in a registry of its own so that several agents
// can run in one process (tests, simulations).
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "netpool_agent_requests_total",
			Help: "CNI calls served by the agent, by verb and CNI error code (0: success).",
		}, []string{"verb", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "netpool_agent_request_duration_seconds",
			Help:    "Time to serve one CNI call, by verb.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"verb"}),
	}
	m.registry.MustRegister(m.requests, m.duration)
	return m
}

func (m *metrics) observe(verb string, code uint, d time.Duration) {
	m.requests.WithLabelValues(verb, strconv.FormatUint(uint64(code), 10)).Inc()
	m.duration.WithLabelValues(verb).Observe(d.Seconds())
}
