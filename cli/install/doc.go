// Package install puts netpool onto a node: it copies the CNI plugin binaries into the host's CNI
// bin directory so that a runtime exec'ing one mid-upgrade never sees a half-written file, and
// writes the global flat configuration that every netpool NAD on the node inherits. The node
// agent's DaemonSet runs it as an init container (netpoolctl install-cni).
package install
