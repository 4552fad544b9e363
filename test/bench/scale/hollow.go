package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/netpool/netpool/cni-plugin/agent"
	"github.com/netpool/netpool/cni-plugin/agentproto"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/test/apicount"
	"github.com/netpool/netpool/test/bench/fanout"
)

// hollow is one simulated node: the real agent (its kubestore, HTTP client, cache and watches, so
// the API server sees a real watcher) serving ADD and DEL through its real request handler, called
// in-process instead of over its socket (the socket and plugin process cost is measured by
// test/bench/kube).
type hollow struct {
	node   string
	cfg    *rest.Config // without the counter
	count  *apicount.Counter
	agent  *agent.Agent
	cancel context.CancelFunc
	// ready is how long the last start took until the cache had synced.
	ready time.Duration
	// unselected records the agent's LISTs and WATCHes of whole collections (no selector).
	unselected *unselected
}

// newHollow prepares the agent of node over cfg; start runs it.
func newHollow(node string, cfg *rest.Config) *hollow {
	return &hollow{node: node, cfg: cfg}
}

// start makes a fresh agent (a restart starts from nothing, as a new agent process does) and
// returns once its cache has synced, or fails after within (0: no bound), stopping it. Its
// requests go through a new counter, which files each watch event by the node its object names.
func (h *hollow) start(ctx context.Context, within time.Duration) error {
	cfg := rest.CopyConfig(h.cfg)
	cfg.QPS, cfg.Burst = kubeclient.DefaultQPS, kubeclient.DefaultBurst
	cfg.UserAgent = agent.UserAgent
	h.count = apicount.NewByCause(apicount.ByNode)
	h.unselected = &unselected{seen: map[string]int{}}
	cfg.Wrap(h.count.Wrap)
	cfg.Wrap(h.unselected.wrap)
	a, err := agent.New(cfg, agent.Options{NodeName: h.node, Socket: "/nonexistent/hollow.sock",
		Log: slog.New(slog.DiscardHandler), Stderr: io.Discard})
	if err != nil {
		return err
	}
	actx, cancel := context.WithCancel(ctx)
	began := time.Now()
	var late *time.Timer
	if within > 0 {
		late = time.AfterFunc(within, cancel) // Start returns once its context ends
	}
	err = a.Store().Start(actx)
	if late != nil && !late.Stop() {
		err = fmt.Errorf("not ready within %s", within)
	}
	if err != nil {
		cancel()
		return fmt.Errorf("agent of %s: %w", h.node, err)
	}
	h.ready = time.Since(began)
	h.agent, h.cancel = a, cancel
	return nil
}

// wide returns the agent's LISTs and WATCHes of a whole collection other than IPPools (the
// cluster's configuration, which every agent needs), by "VERB resource".
func (h *hollow) wide() map[string]int {
	h.unselected.mu.Lock()
	defer h.unselected.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.unselected.seen {
		if !strings.HasSuffix(k, " ippools") {
			out[k] = v
		}
	}
	return out
}

// unselected is a transport wrapper recording LISTs and WATCHes without a label or field selector.
type unselected struct {
	mu   sync.Mutex
	seen map[string]int
}

func (u *unselected) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		verb, resource := apicount.Classify(r)
		q := r.URL.Query()
		if (verb == "LIST" || verb == "WATCH") && q.Get("labelSelector") == "" && q.Get("fieldSelector") == "" {
			u.mu.Lock()
			u.seen[verb+" "+resource]++
			u.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// stop ends the agent's cache and watches.
func (h *hollow) stop() {
	if h.cancel != nil {
		h.cancel()
		h.cancel = nil
	}
}

// call runs one CNI verb for attachment id through the agent's handler.
func (h *hollow) call(ctx context.Context, verb, id string, stdin []byte) *agentproto.Response {
	return h.agent.Handle(ctx, &agentproto.Request{Verb: verb, ContainerID: id, IfName: "net1",
		Netns: "/var/run/netns/" + id, Args: "K8S_POD_NAMESPACE=bench;K8S_POD_NAME=" + id, Stdin: stdin})
}

// startAll starts the agents, at most parallel at once (0: all at once), each bounded by within,
// and returns the time until the last was ready and how many were not.
func startAll(ctx context.Context, hs []*hollow, parallel int, within time.Duration) (time.Duration, int, error) {
	if parallel <= 0 {
		parallel = len(hs)
	}
	began := time.Now()
	var mu sync.Mutex
	var first error
	failed := 0
	fanout.Each(len(hs), parallel, func(i int) {
		if err := hs[i].start(ctx, within); err != nil {
			mu.Lock()
			failed++
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
	})
	return time.Since(began), failed, first
}
