package agentproto

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestRequestValidate(t *testing.T) {
	stdin := []byte(`{"cniVersion":"1.1.0"}`)
	tests := []struct {
		name string
		req  Request
		want string // "" = valid
	}{
		{"ADD", Request{Verb: VerbAdd, ContainerID: "c", IfName: "eth0", Stdin: stdin}, ""},
		{"GC needs no attachment", Request{Verb: VerbGC, Stdin: stdin}, ""},
		{"STATUS needs no attachment", Request{Verb: VerbStatus, Stdin: stdin}, ""},
		{"unknown verb", Request{Verb: "VERSION", Stdin: stdin}, `verb "VERSION" is not one of`},
		{"lower-case verb", Request{Verb: "add", ContainerID: "c", IfName: "eth0", Stdin: stdin}, `verb "add"`},
		{"no stdin", Request{Verb: VerbDel, ContainerID: "c", IfName: "eth0"}, "DEL request has no network config"},
		{"ADD without container", Request{Verb: VerbAdd, IfName: "eth0", Stdin: stdin}, "ADD request needs containerID and ifName"},
		{"CHECK without ifName", Request{Verb: VerbCheck, ContainerID: "c", Stdin: stdin}, "CHECK request needs containerID and ifName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want ErrMalformed containing %q", err, tt.want)
			}
		})
	}
}

func TestResponseValidate(t *testing.T) {
	tests := []struct {
		name string
		resp Response
		want string
	}{
		{"output", Response{Stdout: []byte("{}")}, ""},
		{"empty success", Response{}, ""},
		{"error", Response{Error: &Error{Code: 11, Msg: "later"}}, ""},
		{"both", Response{Stdout: []byte("{}"), Error: &Error{Code: 11}}, "both an error (code 11) and output"},
		{"code 0", Response{Error: &Error{Msg: "x"}}, "error has code 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.resp.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", "not a JSON object"},
		{"array", `[1]`, "not a JSON object"},
		{"bad JSON", `{"verb":`, "unexpected end of JSON input"},
		{"wrong type", `{"verb":1}`, "cannot unmarshal number"},
		{"trailing data", `{"verb":"GC","stdin":"e30="} {}`, "invalid character"},
		{"invalid", `{"verb":"GC"}`, "GC request has no network config"},
		{"too large", `{"verb":"GC","stdin":"` + strings.Repeat("A", MaxMessageSize) + `"}`, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest(strings.NewReader(tt.in))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("DecodeRequest() = %v, want ErrMalformed containing %q", err, tt.want)
			}
		})
	}
	req, err := DecodeRequest(strings.NewReader(" \n" + `{"verb":"GC","stdin":"e30=","future":"ignored"}` + "\n"))
	if err != nil || req.Verb != VerbGC || string(req.Stdin) != "{}" {
		t.Fatalf("DecodeRequest() = %+v, %v", req, err)
	}
}

func TestDecodeReadError(t *testing.T) {
	_, err := DecodeRequest(failingReader{})
	if err == nil || !strings.Contains(err.Error(), "failed to read agent message: boom") {
		t.Fatalf("DecodeRequest() = %v", err)
	}
	_, err = DecodeResponse(strings.NewReader(`{"error":{"code":0}}`))
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("DecodeResponse() = %v", err)
	}
	_, err = DecodeResponse(strings.NewReader(`nope`))
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("DecodeResponse() = %v", err)
	}
}

func TestEncodeTooLarge(t *testing.T) {
	var buf bytes.Buffer
	err := encode(&buf, &Request{Verb: VerbGC, Stdin: bytes.Repeat([]byte("x"), MaxMessageSize)})
	if !errors.Is(err, ErrMalformed) || buf.Len() != 0 {
		t.Fatalf("encode() = %v, wrote %d bytes", err, buf.Len())
	}
	if err := encode(&buf, make(chan int)); err == nil {
		t.Fatal("encode(chan) succeeded")
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

// FuzzDecodeRequest checks that the agent's decoder never panics, and that whatever it accepts
// survives a round trip unchanged (so the plugin and the agent agree on every field).
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"verb":"ADD","containerID":"c1","ifName":"eth0","netns":"/var/run/netns/x","args":"K8S_POD_NAME=p","path":"/opt/cni/bin","stdin":"eyJjbmlWZXJzaW9uIjoiMS4xLjAifQ=="}`,
		`{"verb":"GC","stdin":"e30="}`,
		`{"verb":"STATUS","stdin":"e30=","netnsOverride":"1"}`,
		`{"verb":"DEL","containerID":"c","ifName":"e","stdin":"!!"}`,
		`{"verb":"ADD"}`,
		`{}`,
		`[]`,
		``,
		`{"verb":"ADD","stdin":null}`,
		"{\"verb\":\"CHECK\",\"containerID\":\"\\u0000\",\"ifName\":\"\\ud800\",\"stdin\":\"AA==\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeRequest(bytes.NewReader(data))
		if err != nil {
			if req != nil {
				t.Fatalf("DecodeRequest returned both %+v and %v", req, err)
			}
			return
		}
		var buf bytes.Buffer
		if err := encode(&buf, req); err != nil {
			t.Fatalf("encode(%+v) = %v", req, err)
		}
		again, err := DecodeRequest(&buf)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", buf.String(), err)
		}
		if !reflect.DeepEqual(req, again) {
			t.Fatalf("round trip changed the request: %+v -> %+v", req, again)
		}
	})
}
