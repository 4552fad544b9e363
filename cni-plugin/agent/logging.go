package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/netpool/netpool/cni-plugin/agentproto"
	"github.com/netpool/netpool/ipam"
)

// Log formats, as the controller's --log-format takes them.
const (
	LogFormatJSON = "json"
	LogFormatText = "text"
)

// NewLogger returns the agent's logger writing to w in format ("json" or "text") at level (a word
// of ipam.ParseLogLevel, the spelling the plugin's log_level and the controller share): the
// --log-format and --log-level flags, which mean what the controller's do.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	lvl, err := ipam.ParseLogLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level %q: want %s", level, ipam.LogLevelWords)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case LogFormatJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case LogFormatText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want %s or %s", format, LogFormatJSON, LogFormatText)
	}
}

// logCall writes one line for a served call: at info when it succeeded, at error with the CNI
// code and message when it failed. The pod comes from CNI_ARGS and the addresses from an ADD's
// result, so an operator can find a pod's call in the node's log without its container ID.
func (a *Agent) logCall(req *agentproto.Request, resp *agentproto.Response, took time.Duration) {
	attrs := []any{"verb", req.Verb, "containerID", req.ContainerID, "ifName", req.IfName}
	if pod := podOfArgs(req.Args); pod != "" {
		attrs = append(attrs, "pod", pod)
	}
	if addrs := resultAddresses(resp.Stdout); len(addrs) > 0 {
		attrs = append(attrs, "addresses", addrs)
	}
	attrs = append(attrs, "latency", took)
	if resp.Error != nil {
		attrs = append(attrs, "code", resp.Error.Code, "err", resp.Error.Msg)
		a.log.Error("CNI call failed", attrs...)
		return
	}
	a.log.Info("CNI call served", attrs...)
}

// podOfArgs returns "namespace/name" from CNI_ARGS' K8S_POD_NAMESPACE and K8S_POD_NAME, or "" when
// either is missing or the arguments do not parse (the call itself reports that).
func podOfArgs(cniArgs string) string {
	args, err := ipam.ParseCNIArgs(cniArgs)
	if err != nil || args["K8S_POD_NAMESPACE"] == "" || args["K8S_POD_NAME"] == "" {
		return ""
	}
	return args["K8S_POD_NAMESPACE"] + "/" + args["K8S_POD_NAME"]
}

// resultAddresses returns the addresses of a CNI result, or nil for output that is not one (DEL
// prints nothing, STATUS nothing, GC nothing).
func resultAddresses(stdout []byte) []string {
	if len(stdout) == 0 {
		return nil
	}
	var res struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if json.Unmarshal(stdout, &res) != nil {
		return nil
	}
	var out []string
	for _, ip := range res.IPs {
		out = append(out, strings.TrimSpace(ip.Address))
	}
	return out
}
