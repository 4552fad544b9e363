package apicount

import (
	"bytes"
	"encoding/binary"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		method, url, verb, resource string
	}{
		{"POST", "/apis/ipam.netpool.io/v1alpha1/overlappingrangeipreservations", "POST", "overlappingrangeipreservations"},
		{"GET", "/apis/ipam.netpool.io/v1alpha1/ippoolslices?fieldSelector=spec.node%3Dn", "LIST", "ippoolslices"},
		{"GET", "/apis/ipam.netpool.io/v1alpha1/ippoolslices?watch=true", "WATCH", "ippoolslices"},
		{"GET", "/apis/ipam.netpool.io/v1alpha1/ippools/p", "GET", "ippools"},
		{"GET", "/api/v1/namespaces?watch=1", "WATCH", "namespaces"},
		{"GET", "/api/v1/namespaces/ns", "GET", "namespaces"},
		{"GET", "/api/v1/namespaces/ns/pods/p", "GET", "pods"},
		{"PUT", "/apis/k8s.cni.cncf.io/v1alpha1/namespaces/ns/ipamclaims/c/status", "PUT", "ipamclaims/status"},
		{"DELETE", "/apis/ipam.netpool.io/v1alpha1/ippoolslices/s", "DELETE", "ippoolslices"},
		{"GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dn&watch=true", "WATCH", "nodes"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.url, nil)
		if verb, resource := Classify(r); verb != tt.verb || resource != tt.resource {
			t.Errorf("%s %s = %s %s, want %s %s", tt.method, tt.url, verb, resource, tt.verb, tt.resource)
		}
	}
}

// chunky reads its content a few bytes at a time, so events arrive split across reads.
type chunky struct{ r io.Reader }

func (c chunky) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), 7)]) }
func (c chunky) Close() error               { return nil }

func serve(t *testing.T, contentType string, body []byte) Counts {
	t.Helper()
	return serveWith(t, New(), contentType, body)
}

func serveWith(t *testing.T, k *Counter, contentType string, body []byte) Counts {
	t.Helper()
	rt := k.Wrap(roundTripper(func(r *http.Request) (*http.Response, error) {
		h := http.Header{}
		h.Set("Content-Type", contentType)
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: chunky{bytes.NewReader(body)}}, nil
	}))
	for _, url := range []string{"/apis/g/v1/things?watch=true", "/apis/g/v1/things"} {
		resp, err := rt.RoundTrip(httptest.NewRequest("GET", url, nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
	}
	return k.Snapshot()
}

func TestWatchEventsJSON(t *testing.T) {
	events := []string{
		`{"type":"ADDED","object":{"kind":"Thing","status":{"conditions":[{"type":"BOOKMARK-like text later on is not a bookmark"}]}}}`,
		`{"type":"BOOKMARK","object":{"kind":"Thing","metadata":{"resourceVersion":"7"}}}`,
		`{"type":"MODIFIED","object":{"kind":"Thing","spec":{"text":"a\nb"}}}`,
		`{"type":"DELETED","object":{"kind":"Thing"}}`,
	}
	body := strings.Join(events, "\n") + "\n"
	c := serve(t, "application/json", []byte(body))
	want := int64(len(events[0]) + len(events[2]) + len(events[3]) + 3)
	if c.Events["things"] != 3 || c.Bookmarks["things"] != 1 || c.EventBytes["things"] != want {
		t.Errorf("events %d, bookmarks %d, bytes %d; want 3, 1, %d", c.Events["things"], c.Bookmarks["things"], c.EventBytes["things"], want)
	}
	if c.Watches["things"] != 1 || c.Requests["LIST things"] != 1 || c.ListBytes["things"] != int64(len(body)) {
		t.Errorf("watches %d, lists %d of %d bytes", c.Watches["things"], c.Requests["LIST things"], c.ListBytes["things"])
	}
}

func TestWatchEventsByCause(t *testing.T) {
	events := []string{
		`{"type":"ADDED","object":{"kind":"IPPoolSlice","metadata":{"name":"p.1"},"spec":{"node":"node-a","range":"10.0.0.0/30"}}}`,
		`{"type":"MODIFIED","object":{"kind":"IPPoolSlice","metadata":{"name":"p.1"},"spec":{"node":"node-a","cooling":[{"address":"10.0.0.1"}]}}}`,
		`{"type":"ADDED","object":{"kind":"IPPoolSlice","metadata":{"name":"p.2"},"spec":{"node":"node-b"}}}`,
		`{"type":"BOOKMARK","object":{"kind":"IPPoolSlice","metadata":{"resourceVersion":"7"}}}`,
		`{"type":"MODIFIED","object":{"kind":"Node","metadata":{"name":"node-a"},"spec":{}}}`,
		`{"type":"DELETED","object":{"kind":"IPPool","metadata":{"name":"p"},"spec":{"range":"10.0.0.0/24"}}}`,
		`{"type":"ADDED","object":{"kind":"IPPoolSlice","spec":{"node":"node-a"`, // cut short: not JSON
	}
	c := serveWith(t, NewByCause(ByNode), "application/json", []byte(strings.Join(events, "\n")+"\n"))
	want := map[string]int{"things ADDED node-a": 1, "things MODIFIED node-a": 2, "things ADDED node-b": 1, "things DELETED -": 1, "things " + Undecoded: 1}
	if !maps.Equal(c.Causes, want) || c.Events["things"] != 6 || c.Bookmarks["things"] != 1 {
		t.Errorf("causes %v, events %d, bookmarks %d; want %v, 6, 1", c.Causes, c.Events["things"], c.Bookmarks["things"], want)
	}
	if b, want := c.CauseBytes["things ADDED node-b"], int64(len(events[2])+1); b != want {
		t.Errorf("bytes of node-b's event = %d, want %d (the event and its newline)", b, want)
	}
	var sum int64
	for _, b := range c.CauseBytes {
		sum += b
	}
	if sum != c.EventBytes["things"] {
		t.Errorf("bytes by cause sum to %d, events' bytes %d", sum, c.EventBytes["things"])
	}
	if plain := serve(t, "application/json", []byte(events[0]+"\n")); len(plain.Causes) != 0 || plain.Events["things"] != 1 {
		t.Errorf("a Counter without a cause filed %v (%d events)", plain.Causes, plain.Events["things"])
	}
	proto := binary.BigEndian.AppendUint32(nil, 9)
	proto = append(proto, "k8s\x00ADDED"...)
	if c := serveWith(t, NewByCause(ByNode), "application/vnd.kubernetes.protobuf;stream=watch", proto); c.Causes["things "+Undecoded] != 1 {
		t.Errorf("a protobuf event filed under %v, want %s", c.Causes, Undecoded)
	}
}

func TestWatchEventsProtobuf(t *testing.T) {
	frame := func(payload string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
		return append(b, payload...)
	}
	var body []byte
	body = append(body, frame("k8s\x00\n\x0cmeta.k8s.io/v1\x12\nWatchEvent\x1a\x05ADDED"+strings.Repeat("x", 300))...)
	body = append(body, frame("k8s\x00\n\x0cmeta.k8s.io/v1\x12\nWatchEvent\x1a\x08BOOKMARK")...)
	body = append(body, frame("k8s\x00\n\x0cmeta.k8s.io/v1\x12\nWatchEvent\x1a\x08MODIFIED")...)
	c := serve(t, "application/vnd.kubernetes.protobuf;stream=watch", body)
	if c.Events["things"] != 2 || c.Bookmarks["things"] != 1 {
		t.Errorf("events %d, bookmarks %d; want 2, 1", c.Events["things"], c.Bookmarks["things"])
	}
	if want := int64(len(body) - len(frame("k8s\x00\n\x0cmeta.k8s.io/v1\x12\nWatchEvent\x1a\x08BOOKMARK"))); c.EventBytes["things"] != want {
		t.Errorf("event bytes %d, want %d", c.EventBytes["things"], want)
	}
}

func TestCountsArithmetic(t *testing.T) {
	a, b := newCounts(), newCounts()
	a.Requests["POST x"], a.Events["x"], a.Watches["x"] = 5, 3, 1
	b.Requests["POST x"], b.Requests["LIST x"], b.Events["x"] = 2, 1, 1
	d := a.Sub(b)
	if d.Requests["POST x"] != 3 || d.Events["x"] != 2 || d.Watches["x"] != 1 {
		t.Errorf("Sub = %+v", d)
	}
	a.Add(b)
	if a.TotalRequests("POST") != 7 || a.TotalRequests() != 8 || a.TotalEvents() != 4 {
		t.Errorf("after Add: POST %d, all %d, events %d", a.TotalRequests("POST"), a.TotalRequests(), a.TotalEvents())
	}
}

func TestFailures(t *testing.T) {
	k := New()
	calls := 0
	rt := k.Wrap(roundTripper(func(r *http.Request) (*http.Response, error) {
		calls++
		switch calls {
		case 1:
			return &http.Response{StatusCode: http.StatusConflict, Body: io.NopCloser(strings.NewReader("{}"))}, nil
		case 2:
			return nil, io.ErrUnexpectedEOF
		}
		return &http.Response{StatusCode: http.StatusCreated, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	}))
	for range 3 {
		resp, err := rt.RoundTrip(httptest.NewRequest("POST", "/apis/g/v1/things", nil))
		if err == nil {
			_ = resp.Body.Close()
		}
	}
	c := k.Snapshot()
	if c.Failures["POST things 409"] != 1 || c.Failures["POST things no answer"] != 1 || len(c.Failures) != 2 || c.Requests["POST things"] != 3 {
		t.Errorf("failures %v, requests %v", c.Failures, c.Requests)
	}
}
