// Package cli is netpoolctl, the operator's command line: its cobra commands and their output.
// cmd/netpoolctl only runs NewRoot.
package cli
