package agentproto

import "fmt"

// envelopeReserve is the part of MaxMessageSize kept for a Request's fields other than Stdin.
const envelopeReserve = 64 << 10

// MaxStdinSize bounds the network config a Request carries. Stdin travels base64-encoded (4 bytes
// for every 3), so this is the largest config whose Request fits MaxMessageSize with the rest of
// the envelope: about 2.9 MiB.
const MaxStdinSize = (MaxMessageSize - envelopeReserve) / 4 * 3

// maxFieldsSize bounds the other string fields together. JSON may escape one byte as six (\u00XX),
// so six times this fits the envelope reserve, field names included.
const maxFieldsSize = envelopeReserve/6 - 1024

// ErrTooLarge is returned by Validate when a Request could not fit one message. Nothing was sent:
// the same request will never fit, so it is not a transport failure.
var ErrTooLarge = fmt.Errorf("%w: request too large", ErrMalformed)

// checkSizes reports a Request that would not fit MaxMessageSize once encoded.
func (r *Request) checkSizes() error {
	if len(r.Stdin) > MaxStdinSize {
		return fmt.Errorf("%w: the network config is %d bytes, more than the %d the agent accepts", ErrTooLarge, len(r.Stdin), MaxStdinSize)
	}
	if n := len(r.Verb) + len(r.ContainerID) + len(r.Netns) + len(r.IfName) + len(r.Args) + len(r.Path) + len(r.NetnsOverride); n > maxFieldsSize {
		return fmt.Errorf("%w: the CNI environment (CNI_ARGS, CNI_PATH, CNI_NETNS, ...) is %d bytes, more than the %d the agent accepts", ErrTooLarge, n, maxFieldsSize)
	}
	return nil
}
