// Package egressrouter is the netpool-egress-router CNI plugin: a main plugin that Multus runs in an
// egress router pod's network namespace. ADD makes a macvlan on the node's external network, claims
// the router's addresses on it after an ARP probe or IPv6 duplicate address detection, routes the
// traffic that arrives on the pod's cluster interface out of the macvlan by policy, and installs one
// nftables table that redirects (DNAT) each configured port to its destination, masquerades (SNAT) to
// the router's address, and filters what may be forwarded. CHECK verifies all of it; DEL removes it.
//
// Config accepts two forms, converted to one Router: netpool's (written by the EgressRouter
// reconciler) and the one OpenShift's network operator writes into its egress-router NAD.
package egressrouter
