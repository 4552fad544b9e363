// Package apicount counts what one Kubernetes API client costs the API server and receives from
// it, by wrapping the client's transport (rest.Config.Wrap): requests by verb and resource, the
// bytes of the lists it reads, and the events and bytes of its watches. The benchmarks and tests
// that prove what a node agent watches (DESIGN.md, invariant 9) read it.
//
// Watch events are counted as the frames of the watch stream, whatever its encoding (JSON events
// end with a newline; protobuf ones are length-prefixed), without decoding them. Bookmarks, which
// the API server sends to every watcher now and then whatever happens, are counted apart. A
// Counter made with NewByCause also decodes each JSON event to file it under its cause (ByNode:
// its type and the node its object belongs to), so a test can tell the events a node's own work
// sends it from those another node's work does, whatever the order or number of its own.
package apicount

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Counts are what a Counter saw, by resource (the plural name: "ippoolslices", "namespaces").
type Counts struct {
	// Requests are the requests made other than watches, by "VERB resource" ("POST
	// overlappingrangeipreservations", "LIST ippoolslices": a GET without a name is a LIST).
	Requests map[string]int
	// Watches are the watch requests made, by resource.
	Watches map[string]int
	// ListBytes are the bytes of list responses, by resource.
	ListBytes map[string]int64
	// Events are the watch events received other than bookmarks, by resource.
	Events map[string]int
	// EventBytes are the bytes of those events, by resource.
	EventBytes map[string]int64
	// Bookmarks are the bookmarks received, by resource.
	Bookmarks map[string]int
	// Failures are the requests (watches included) that got no answer or an error status, by
	// "VERB resource status" (the HTTP status code, or "no answer").
	Failures map[string]int
	// Causes are the events counted in Events by "resource cause" (the Counter's Cause: "ippoolslices
	// ADDED node-1"); empty unless the Counter was made with NewByCause.
	Causes map[string]int
	// CauseBytes are the bytes of those events, by the same keys.
	CauseBytes map[string]int64
}

func newCounts() Counts {
	return Counts{Requests: map[string]int{}, Watches: map[string]int{}, ListBytes: map[string]int64{}, Events: map[string]int{},
		EventBytes: map[string]int64{}, Bookmarks: map[string]int{}, Failures: map[string]int{}, Causes: map[string]int{},
		CauseBytes: map[string]int64{}}
}

// Sub returns c minus o, key by key (the keys of c).
func (c Counts) Sub(o Counts) Counts {
	out := newCounts()
	subInto(out.Requests, c.Requests, o.Requests)
	subInto(out.Watches, c.Watches, o.Watches)
	subInto(out.ListBytes, c.ListBytes, o.ListBytes)
	subInto(out.Events, c.Events, o.Events)
	subInto(out.EventBytes, c.EventBytes, o.EventBytes)
	subInto(out.Bookmarks, c.Bookmarks, o.Bookmarks)
	subInto(out.Failures, c.Failures, o.Failures)
	subInto(out.Causes, c.Causes, o.Causes)
	subInto(out.CauseBytes, c.CauseBytes, o.CauseBytes)
	return out
}

// Add adds o to c, key by key.
func (c Counts) Add(o Counts) {
	addInto(c.Requests, o.Requests)
	addInto(c.Watches, o.Watches)
	addInto(c.ListBytes, o.ListBytes)
	addInto(c.Events, o.Events)
	addInto(c.EventBytes, o.EventBytes)
	addInto(c.Bookmarks, o.Bookmarks)
	addInto(c.Failures, o.Failures)
	addInto(c.Causes, o.Causes)
	addInto(c.CauseBytes, o.CauseBytes)
}

// subInto sets out[k] to a[k]-b[k] for every key of a.
func subInto[V int | int64](out, a, b map[string]V) {
	for k, v := range a {
		out[k] = v - b[k]
	}
}

// addInto adds every value of b to dst's.
func addInto[V int | int64](dst, b map[string]V) {
	for k, v := range b {
		dst[k] += v
	}
}

// TotalEvents is the number of watch events other than bookmarks, over every resource.
func (c Counts) TotalEvents() int {
	n := 0
	for _, v := range c.Events {
		n += v
	}
	return n
}

// TotalRequests is the number of requests other than watches whose "VERB resource" key starts
// with one of verbs (all of them when verbs is empty).
func (c Counts) TotalRequests(verbs ...string) int {
	n := 0
	for k, v := range c.Requests {
		if len(verbs) == 0 || matchesVerb(k, verbs) {
			n += v
		}
	}
	return n
}

func matchesVerb(key string, verbs []string) bool {
	for _, v := range verbs {
		if strings.HasPrefix(key, v+" ") {
			return true
		}
	}
	return false
}

// Counter counts one client's traffic. Its zero value is not usable: call New.
type Counter struct {
	mu    sync.Mutex
	c     Counts
	cause Cause
}

// Cause names why a watch event of resource reached the client, from the event as the API server
// sent it (one JSON object: {"type": ..., "object": ...}).
type Cause func(resource string, event []byte) string

// Undecoded is the cause of an event that was not JSON (protobuf, which the API server serves
// for built-in kinds only when asked): it is counted, not decoded.
const Undecoded = "undecoded"

// New returns an empty Counter.
func New() *Counter { return &Counter{c: newCounts()} }

// NewByCause returns an empty Counter that also files each watch event under cause (Counts.Causes).
// It keeps each JSON event whole until it ends, so it costs an event's bytes of memory per watch.
func NewByCause(cause Cause) *Counter { return &Counter{c: newCounts(), cause: cause} }

// ByNode is a Cause: the event's type and the node its object belongs to, the object's spec.node
// (a reservation's, a slice's) or, for a Node, its name; "-" when it names none, so "ADDED
// node-1", "MODIFIED -". Every kind a node agent filters by its node says its node one of these
// two ways.
func ByNode(_ string, event []byte) string {
	var e struct {
		Type   string `json:"type"`
		Object struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Node string `json:"node"`
			} `json:"spec"`
		} `json:"object"`
	}
	if err := json.Unmarshal(event, &e); err != nil || e.Type == "" {
		return Undecoded
	}
	node := e.Object.Spec.Node
	if e.Object.Kind == "Node" {
		node = e.Object.Metadata.Name
	}
	if node == "" {
		node = "-"
	}
	return e.Type + " " + node
}

// Snapshot returns a copy of what the counter has seen so far.
func (k *Counter) Snapshot() Counts {
	k.mu.Lock()
	defer k.mu.Unlock()
	return Counts{Requests: maps.Clone(k.c.Requests), Watches: maps.Clone(k.c.Watches), ListBytes: maps.Clone(k.c.ListBytes), Events: maps.Clone(k.c.Events),
		EventBytes: maps.Clone(k.c.EventBytes), Bookmarks: maps.Clone(k.c.Bookmarks), Failures: maps.Clone(k.c.Failures), Causes: maps.Clone(k.c.Causes),
		CauseBytes: maps.Clone(k.c.CauseBytes)}
}

// Wrap is a rest.Config transport wrapper that counts through k.
func (k *Counter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		verb, resource := Classify(r)
		k.mu.Lock()
		if verb == "WATCH" {
			k.c.Watches[resource]++
		} else {
			k.c.Requests[verb+" "+resource]++
		}
		k.mu.Unlock()
		resp, err := rt.RoundTrip(r)
		if err != nil || resp.StatusCode >= http.StatusBadRequest {
			status := "no answer"
			if err == nil {
				status = strconv.Itoa(resp.StatusCode)
			}
			k.mu.Lock()
			k.c.Failures[verb+" "+resource+" "+status]++
			k.mu.Unlock()
		}
		if err != nil || resp.StatusCode != http.StatusOK {
			return resp, err
		}
		switch verb {
		case "WATCH":
			resp.Body = &watchBody{ReadCloser: resp.Body, k: k, resource: resource,
				proto: strings.Contains(resp.Header.Get("Content-Type"), "protobuf")}
		case "LIST":
			resp.Body = &listBody{ReadCloser: resp.Body, k: k, resource: resource}
		}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Classify names a request as the API server's audit log would: its verb (GET of a collection is
// LIST, a GET with watch=true is WATCH) and its resource, with the subresource after a slash
// ("ipamclaims/status").
func Classify(r *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// /api/v1/[namespaces/ns/]res[/name[/sub]], /apis/g/v/[namespaces/ns/]res[/name[/sub]]
	i := 2
	if len(parts) > 0 && parts[0] == "apis" {
		i = 3
	}
	rest := []string{}
	if i < len(parts) {
		rest = parts[i:]
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	switch len(rest) {
	case 0:
		return r.Method, ""
	case 1:
		resource = rest[0]
	case 2:
		resource = rest[0]
	default:
		resource = rest[0] + "/" + rest[2]
	}
	verb = r.Method
	if r.Method == http.MethodGet && len(rest) == 1 {
		verb = "LIST"
		if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
			verb = "WATCH"
		}
	}
	return verb, resource
}

type listBody struct {
	io.ReadCloser
	k        *Counter
	resource string
}

func (b *listBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.k.mu.Lock()
		b.k.c.ListBytes[b.resource] += int64(n)
		b.k.mu.Unlock()
	}
	return n, err
}

// bookmarkProbe is how far into an event its type is looked for: the type comes first in both
// encodings.
const bookmarkProbe = 96

// watchBody splits a watch stream into its events as it is read.
type watchBody struct {
	io.ReadCloser
	k        *Counter
	resource string
	proto    bool

	// the event being read: its bytes so far, the start of it (for its type), the whole of it
	// when the counter files events by cause (JSON only), and for protobuf the length prefix and
	// how much of the event is left.
	size   int64
	head   []byte
	whole  []byte
	prefix []byte
	left   int
}

func (b *watchBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.k.mu.Lock()
		if b.proto {
			b.protoBytes(p[:n])
		} else {
			b.jsonBytes(p[:n])
		}
		b.k.mu.Unlock()
	}
	return n, err
}

// jsonBytes consumes JSON events, each ended by a newline (strings in JSON escape theirs).
func (b *watchBody) jsonBytes(p []byte) {
	for len(p) > 0 {
		nl := bytes.IndexByte(p, '\n')
		part := p
		if nl >= 0 {
			part = p[:nl+1]
		}
		b.take(part)
		p = p[len(part):]
		if nl >= 0 {
			b.end()
		}
	}
}

// protoBytes consumes protobuf events, each a 4-byte big-endian length and that many bytes.
func (b *watchBody) protoBytes(p []byte) {
	for len(p) > 0 {
		if b.left == 0 {
			need := 4 - len(b.prefix)
			if need > len(p) {
				need = len(p)
			}
			b.prefix = append(b.prefix, p[:need]...)
			b.size += int64(need)
			p = p[need:]
			if len(b.prefix) < 4 {
				return
			}
			b.left = int(binary.BigEndian.Uint32(b.prefix))
			b.prefix = b.prefix[:0]
			if b.left == 0 {
				b.end()
			}
			continue
		}
		part := p
		if len(part) > b.left {
			part = p[:b.left]
		}
		b.take(part)
		b.left -= len(part)
		p = p[len(part):]
		if b.left == 0 {
			b.end()
		}
	}
}

func (b *watchBody) take(part []byte) {
	b.size += int64(len(part))
	if room := bookmarkProbe - len(b.head); room > 0 {
		b.head = append(b.head, part[:min(room, len(part))]...)
	}
	if b.k.cause != nil && !b.proto {
		b.whole = append(b.whole, part...)
	}
}

// bookmark reports whether the event just read is a bookmark: its type comes first, as the
// first field of a JSON event or within the protobuf envelope.
func (b *watchBody) bookmark() bool {
	if b.proto {
		return bytes.Contains(b.head, []byte("BOOKMARK"))
	}
	return bytes.HasPrefix(bytes.TrimLeft(b.head, " \r\n"), []byte(`{"type":"BOOKMARK"`))
}

// end counts the event just read.
func (b *watchBody) end() {
	if b.bookmark() {
		b.k.c.Bookmarks[b.resource]++
	} else if b.size > 1 {
		b.k.c.Events[b.resource]++
		b.k.c.EventBytes[b.resource] += b.size
		if b.k.cause != nil {
			cause := Undecoded
			if !b.proto {
				cause = b.k.cause(b.resource, b.whole)
			}
			b.k.c.Causes[b.resource+" "+cause]++
			b.k.c.CauseBytes[b.resource+" "+cause] += b.size
		}
	}
	b.size, b.head, b.whole = 0, b.head[:0], b.whole[:0]
}
