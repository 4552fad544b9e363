// Package agent is the netpool node agent: the warm half of the Kubernetes mode.
//
// The netpool CNI plugin binary links no Kubernetes client and no TLS; with datastore kubernetes it
// forwards each call over a unix socket (package agentproto) to this agent, one per node. The agent
// keeps one API client with raised rate limits and an informer cache (package kubestore), and runs
// each forwarded call through the same verb handlers as the plugin (package ipamplugin), with the
// shared Kubernetes store and the answer captured for the plugin to print.
//
// Node identity: the --node-name flag, which the installer sets, as whereabouts takes it from its
// installer's config; the NODENAME environment variable overrides it, so one machine can simulate
// several nodes with one agent (and one socket) each.
package agent
