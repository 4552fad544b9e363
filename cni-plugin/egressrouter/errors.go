package egressrouter

import (
	"errors"

	"github.com/containernetworking/cni/pkg/types"
)

// The plugin's own CNI error codes (100 and up are the plugins' by the CNI spec; netpool's IPAM plugin
// uses 100-106). They are API: the reconciler and operators match on them, and docs/egress-router.md
// lists them.
const (
	CodeAddressInUse             uint = 110
	CodeCheckFailed              uint = 111
	CodeMasterNotFound           uint = 112
	CodeClusterInterfaceNotFound uint = 113
	CodeRouterExists             uint = 114
)

var (
	// ErrInvalidConfig is returned when the network configuration cannot be used as written.
	ErrInvalidConfig = errors.New("invalid egress-router config")
	// ErrAddressInUse is returned when an ARP probe or IPv6 duplicate address detection finds the
	// router's address already held by another host on the egress link.
	ErrAddressInUse = errors.New("address already in use on the egress link")
	// ErrCheckFailed is returned by CHECK when the namespace differs from what ADD installed.
	ErrCheckFailed = errors.New("egress router check failed")
	// ErrMasterNotFound is returned when the macvlan master does not exist in the host namespace, or
	// no master was configured and the host namespace has no default route to take it from.
	ErrMasterNotFound = errors.New("macvlan master not found")
	// ErrClusterInterfaceNotFound is returned when the pod has no cluster interface to take
	// redirected traffic from.
	ErrClusterInterfaceNotFound = errors.New("cluster interface not found")
	// ErrRouterExists is returned by ADD when the pod's namespace already holds an egress router
	// (another attachment's, or what one left): a pod has at most one.
	ErrRouterExists = errors.New("the pod already has an egress router")
)

var codes = []struct {
	err  error
	code uint
}{
	{ErrInvalidConfig, types.ErrInvalidNetworkConfig},
	{ErrAddressInUse, CodeAddressInUse},
	{ErrCheckFailed, CodeCheckFailed},
	{ErrMasterNotFound, CodeMasterNotFound},
	{ErrClusterInterfaceNotFound, CodeClusterInterfaceNotFound},
	{ErrRouterExists, CodeRouterExists},
}

// toCNIError gives err its CNI code. skel passes a *types.Error through unchanged and turns anything
// else into code 999, so every error leaves here typed, with its whole message.
func toCNIError(err error) error {
	if err == nil {
		return nil
	}
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		return err
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return types.NewError(c.code, err.Error(), "")
		}
	}
	return types.NewError(types.ErrInternal, err.Error(), "")
}
