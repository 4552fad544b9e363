package agentproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// MaxMessageSize bounds one encoded Request or Response. A network config with a large
// prevResult is a few KiB; the bound only stops a broken peer from exhausting memory.
const MaxMessageSize = 4 << 20

// Verbs a Request may carry: the CNI commands that reach an IPAM plugin's store. VERSION is
// answered by the plugin itself.
const (
	VerbAdd    = "ADD"
	VerbDel    = "DEL"
	VerbCheck  = "CHECK"
	VerbGC     = "GC"
	VerbStatus = "STATUS"
)

var verbs = []string{VerbAdd, VerbDel, VerbCheck, VerbGC, VerbStatus}

// ErrMalformed is returned when a message is not a valid Request or Response.
var ErrMalformed = errors.New("malformed agent message")

// Request is one CNI invocation: the CNI_* environment the runtime set and the config on stdin.
type Request struct {
	Verb          string `json:"verb"`
	ContainerID   string `json:"containerID,omitempty"`
	Netns         string `json:"netns,omitempty"`
	IfName        string `json:"ifName,omitempty"`
	Args          string `json:"args,omitempty"`
	Path          string `json:"path,omitempty"`
	NetnsOverride string `json:"netnsOverride,omitempty"`
	Stdin         []byte `json:"stdin"`
}

// Error is a CNI error as the spec defines it; the plugin prints it as the runtime expects.
type Error struct {
	Code    uint   `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details,omitempty"`
}

// Response is the outcome of one Request: Stdout when the call succeeded (possibly empty, as for
// DEL), or Error.
type Response struct {
	Stdout []byte `json:"stdout,omitempty"`
	Error  *Error `json:"error,omitempty"`
}

// Validate reports what makes r unusable. ADD, DEL and CHECK name one attachment, so they need
// a container ID and an interface name, as skel requires of the runtime.
func (r *Request) Validate() error {
	if !slices.Contains(verbs, r.Verb) {
		return fmt.Errorf("%w: verb %q is not one of %v", ErrMalformed, r.Verb, verbs)
	}
	if len(r.Stdin) == 0 {
		return fmt.Errorf("%w: %s request has no network config", ErrMalformed, r.Verb)
	}
	if err := r.checkSizes(); err != nil {
		return err
	}
	if r.Verb == VerbAdd || r.Verb == VerbDel || r.Verb == VerbCheck {
		if r.ContainerID == "" || r.IfName == "" {
			return fmt.Errorf("%w: %s request needs containerID and ifName", ErrMalformed, r.Verb)
		}
	}
	return nil
}

// Validate reports what makes r unusable: a response carries an error or output, not both.
func (r *Response) Validate() error {
	if r.Error != nil && len(r.Stdout) > 0 {
		return fmt.Errorf("%w: response carries both an error (code %d) and output", ErrMalformed, r.Error.Code)
	}
	if r.Error != nil && r.Error.Code == 0 {
		return fmt.Errorf("%w: response error has code 0", ErrMalformed)
	}
	return nil
}

// DecodeRequest reads one Request from r and validates it.
func DecodeRequest(r io.Reader) (*Request, error) {
	var req Request
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return &req, nil
}

// DecodeResponse reads one Response from r and validates it.
func DecodeResponse(r io.Reader) (*Response, error) {
	var resp Response
	if err := decode(r, &resp); err != nil {
		return nil, err
	}
	if err := resp.Validate(); err != nil {
		return nil, err
	}
	return &resp, nil
}

// decode reads exactly one JSON object of at most MaxMessageSize bytes. Trailing data other than
// white space is an error: one connection carries one message.
func decode(r io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, MaxMessageSize+1))
	if err != nil {
		return fmt.Errorf("failed to read agent message: %w", err)
	}
	if len(b) > MaxMessageSize {
		return fmt.Errorf("%w: larger than %d bytes", ErrMalformed, MaxMessageSize)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

// encode writes v as one JSON message.
func encode(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > MaxMessageSize {
		return fmt.Errorf("%w: encoded message is %d bytes, more than %d", ErrMalformed, len(b), MaxMessageSize)
	}
	_, err = w.Write(b)
	return err
}
