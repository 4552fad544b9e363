// Package egressnad is the NAD config of an EgressRouter: the one Go type (and its JSON) that the
// EgressRouter reconciler writes into NAD X's spec.config and the netpool-egress-router CNI plugin
// reads. Both import it, so the two halves cannot drift apart; docs/egress-router.md shows the JSON.
//
// The package holds the shape and its decoding, not the rules: the API server's CEL rules check an
// EgressRouter, and the plugin validates every config it is given (a NAD author may write one by
// hand). It imports only the standard library, because the plugin links no Kubernetes code.
package egressnad
