package cluster

import (
	"context"
	"path/filepath"
)

// multusRBAC lets the Multus thin plugin, which runs on each node with multusUser's kubeconfig, do
// what Multus' own ClusterRole lets it: read pods and NADs, write the network-status annotation and
// events.
const multusRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: netpool-test-multus}
rules:
- apiGroups: ["k8s.cni.cncf.io"]
  resources: ["*"]
  verbs: ["*"]
- apiGroups: [""]
  resources: ["pods", "pods/status"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["", "events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: netpool-test-multus}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: netpool-test-multus}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: ` + multusUser + `}
`

// bootstrapRBAC installs what the cluster's own parts need before the nodes start: the
// NetworkAttachmentDefinition CRD (Multus installs it with itself) and Multus' permissions.
func (c *Cluster) bootstrapRBAC(ctx context.Context) error {
	crd, err := DecodeYAML(filepath.Join(c.opts.Root, "test", "envtest", "testdata", "nad-crd.yaml"))
	if err != nil {
		return err
	}
	rbac, err := DecodeYAMLBytes([]byte(multusRBAC))
	if err != nil {
		return err
	}
	return c.Apply(ctx, append(crd, rbac...))
}
