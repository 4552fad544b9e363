// Package agentproto is the wire format between the netpool CNI plugin and the netpool node agent.
//
// In Kubernetes mode the plugin binary stays small (no client-go, no TLS): it forwards each CNI
// call over a unix socket to the agent, which keeps warm API clients and an informer cache. One
// connection carries one call: the plugin writes one JSON Request, the agent answers with one JSON
// Response and closes the connection. The Response holds either the bytes the plugin must print on
// stdout or a CNI error, which the plugin returns unchanged.
//
// The package uses the standard library only, so linking it costs the plugin nothing.
package agentproto
