package egressrouter

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/crds/network/v1/egressnad"
)

// egressMode is what a router's spec.mode makes of its children: the mode's part of the NAD
// config and Service X's ports. Each mode is a type implementing both, so a mode added to the API
// does not compile into a router until it has them; modeOf refuses a mode it has no type for
// (a CRD newer than the controller) instead of giving it some default.
type egressMode interface {
	// configure writes the mode's part of the NAD config.
	configure(c *egressnad.Config)
	// servicePorts are Service X's ports; none makes it headless.
	servicePorts() []corev1.ServicePort
}

// modeOf returns the router's mode, or an UnsupportedMode problem.
func modeOf(r *networkv1.EgressRouter) (egressMode, error) {
	switch r.Spec.Mode {
	case networkv1.EgressRouterModeRedirect, "":
		return redirectMode{spec: r.Spec.Redirect}, nil
	}
	return nil, &egressProblem{networkv1.ReasonUnsupportedMode, fmt.Sprintf(
		"mode %q is not supported by this controller; the only mode is %s", r.Spec.Mode, networkv1.EgressRouterModeRedirect)}
}

// redirectMode is the Redirect mode: the rules, then the fallback.
type redirectMode struct {
	spec *networkv1.RedirectConfig
}

// configure writes the redirect section, every rule with its targetPort (defaulted to its port,
// as the API documents). The config's mode is left out: Redirect is its default, and the NADs of
// routers made before the field existed keep their bytes, so no router pod is replaced on upgrade.
func (m redirectMode) configure(c *egressnad.Config) {
	c.Redirect = &egressnad.Redirect{Rules: []egressnad.Rule{}}
	if m.spec == nil {
		return
	}
	for _, rule := range m.spec.RedirectRules {
		target := rule.TargetPort
		if target == 0 {
			target = rule.Port
		}
		c.Redirect.Rules = append(c.Redirect.Rules, egressnad.Rule{
			DestinationIP: rule.DestinationIP, Port: rule.Port, Protocol: string(rule.Protocol), TargetPort: &target,
		})
	}
	c.Redirect.FallbackIP = m.spec.FallbackIP
}

// servicePorts are one port per rule, named <protocol>-<port>, whose targetPort is the rule's
// port: the pod receives on port and DNATs to the rule's targetPort. A router with only a fallback
// forwards every port, which a Service cannot list: it gets none.
func (m redirectMode) servicePorts() []corev1.ServicePort {
	ports := []corev1.ServicePort{}
	if m.spec == nil {
		return ports
	}
	for _, rule := range m.spec.RedirectRules {
		ports = append(ports, corev1.ServicePort{
			Name:       fmt.Sprintf("%s-%d", strings.ToLower(string(rule.Protocol)), rule.Port),
			Protocol:   corev1.Protocol(rule.Protocol),
			Port:       rule.Port,
			TargetPort: intstr.FromInt32(rule.Port),
		})
	}
	return ports
}
