package agentproto

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestLargestRequestFitsOneMessage checks the derivation of MaxStdinSize: a request at every
// limit, its strings made of bytes JSON escapes six-fold, still encodes within MaxMessageSize.
func TestLargestRequestFitsOneMessage(t *testing.T) {
	each := maxFieldsSize / 4
	req := &Request{
		Verb: VerbAdd, ContainerID: strings.Repeat("\x01", each), IfName: "net1",
		Netns: strings.Repeat("\x02", each), Args: strings.Repeat("\x03", each), Path: strings.Repeat("\x04", maxFieldsSize-3*each-len(VerbAdd)-len("net1")),
		Stdin: bytes.Repeat([]byte{0xff}, MaxStdinSize),
	}
	if err := req.Validate(); err != nil {
		t.Fatalf("a request at the limits does not validate: %v", err)
	}
	var buf bytes.Buffer
	if err := encode(&buf, req); err != nil {
		t.Fatalf("a request at the limits does not encode: %v", err)
	}
	if buf.Len() > MaxMessageSize {
		t.Fatalf("encoded %d bytes, more than %d", buf.Len(), MaxMessageSize)
	}

	over := *req
	over.Stdin = append(over.Stdin, 0)
	if err := over.Validate(); !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrMalformed) {
		t.Errorf("stdin one byte over: %v, want ErrTooLarge", err)
	}
	over = *req
	over.Args += "x"
	if err := over.Validate(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("environment one byte over: %v, want ErrTooLarge", err)
	}
}
