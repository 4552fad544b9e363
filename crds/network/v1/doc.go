// Package v1 holds netpool's EgressRouter API, group network.netpool.io, version v1.
//
// The schema is, field for field, OpenShift's network.operator.openshift.io/v1 EgressRouter, with
// the same defaults and enums, so a manifest written for OpenShift applies after changing only its
// apiVersion. OpenShift's oneOf rules (spec.redirect with mode Redirect, networkInterface.macvlan)
// and its ipv4/ipv6 formats are written as CEL rules here, and further CEL rules refuse what
// OpenShift accepts but cannot run (docs/egress-router.md lists them). The optional fields
// nodeSelector and pool are netpool's own; an OpenShift manifest never sets them.
//
// The package imports only the standard library and k8s.io/apimachinery.
//
// +kubebuilder:object:generate=true
// +groupName=network.netpool.io
package v1
