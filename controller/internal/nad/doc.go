// Package nad is the NAD reconciler: it parses every NetworkAttachmentDefinition with netpool IPAM
// with the plugin's own parser, creates the pools of inline ranges, checks references to
// operator-made pools, and reports bad configs as Warning Events on the NAD. It starts once the NAD
// CRD is served (gate.go); until then the controller runs without it and is not ready.
package nad
