package ipamplugin

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/cni-plugin/agentproto"
	"github.com/netpool/netpool/ipam"
)

// netpool's own CNI error codes (100 and up are reserved for plugins by the CNI spec). They are
// API: runtimes and operators match on them, and the README lists them.
const (
	CodePoolExhausted      uint = 100
	CodeAddressInUse       uint = 101
	CodeAddressNotAllowed  uint = 102
	CodeAttachmentConflict uint = 103
	CodeCheckFailed        uint = 104
	CodeStoreUnusable      uint = 105
	// CodeDatastoreNotServed means the config's datastore is not served by this process: datastore
	// kubernetes reached a Plugin that neither forwards to the agent nor opens a store for it. The
	// netpool binary forwards and the agent serves, so only a program embedding the verbs sees it.
	CodeDatastoreNotServed uint = 106
	// CodePersistentOwnerInvalid means the attachment's IPAMClaim may not be used: its
	// spec.network or spec.interface is not this attachment's, or ips were requested with it.
	CodePersistentOwnerInvalid uint = 107
	// CodePersistentOwnerNotFound means the IPAMClaim the attachment references (or its pod) does
	// not exist.
	CodePersistentOwnerNotFound uint = 108
)

// errDatastoreNotServed is returned when a datastore named in the config cannot be served by this
// process: datastore kubernetes reaches a Plugin that does not forward to the agent.
var errDatastoreNotServed = errors.New("datastore not served by this process")

var codes = []struct {
	err  error
	code uint
}{
	{ipam.ErrInvalidConfig, types.ErrInvalidNetworkConfig},
	{allocator.ErrStoreBusy, types.ErrTryAgainLater},
	{agentproto.ErrUnreachable, types.ErrTryAgainLater},
	{agentproto.ErrNoAnswer, types.ErrTryAgainLater},
	// The call's own bound (lock_timeout) ran out while the store was working: retrying can succeed.
	{context.DeadlineExceeded, types.ErrTryAgainLater},
	{allocator.ErrPoolExhausted, CodePoolExhausted},
	{allocator.ErrAddressInUse, CodeAddressInUse},
	{allocator.ErrAddressNotAllowed, CodeAddressNotAllowed},
	{allocator.ErrAttachmentConflict, CodeAttachmentConflict},
	{allocator.ErrCheckFailed, CodeCheckFailed},
	{allocator.ErrStoreUnusable, CodeStoreUnusable},
	{errDatastoreNotServed, CodeDatastoreNotServed},
	{allocator.ErrPersistentOwnerInvalid, CodePersistentOwnerInvalid},
	{allocator.ErrPersistentOwnerNotFound, CodePersistentOwnerNotFound},
}

// toCNIError gives err its CNI code. skel passes a *types.Error through unchanged and turns
// anything else into code 999, so every error leaves here typed.
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

// toStatusError maps a STATUS failure onto the spec's codes: 50 when ADD cannot succeed
// (exhausted, unusable store, agent not reachable), 11 when the store is only busy. An error that
// already has its code (the agent's answer) passes unchanged.
func toStatusError(err error) error {
	var cniErr *types.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &cniErr):
		return err
	case errors.Is(err, allocator.ErrStoreBusy):
		return toCNIError(err)
	case errors.Is(err, ipam.ErrInvalidConfig):
		return toCNIError(err)
	}
	return types.NewError(types.ErrPluginNotAvailable, "plugin not available: "+err.Error(), "")
}
