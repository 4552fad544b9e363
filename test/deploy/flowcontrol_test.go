package deploy

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness/kustomize"
)

// classification is where the API server's priority and fairness put one request: the UIDs of the
// FlowSchema it matched and of that schema's priority level, from the response headers.
type classification struct{ flowSchema, priorityLevel string }

// TestAgentsHaveTheirOwnPriorityLevel applies the base to a real API server and reads how priority
// and fairness classifies requests: the agent's ServiceAccount's, a GET and a WATCH (the verbs of
// a restart storm), land in deploy/base/agent-flowcontrol.yaml's FlowSchema and priority level; the
// controller's ServiceAccount, in the same namespace, does not.
func TestAgentsHaveTheirOwnPriorityLevel(t *testing.T) {
	env := envtest.StartBare(t, envtest.DefaultModule)
	kubectlApply(t, env, kustomize.Render(t, "base"))
	ctx := context.Background()
	fs := &flowcontrolv1.FlowSchema{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "netpool-agent"}, fs); err != nil {
		t.Fatalf("the base's FlowSchema: %v", err)
	}
	pl := &flowcontrolv1.PriorityLevelConfiguration{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: fs.Spec.PriorityLevelConfiguration.Name}, pl); err != nil {
		t.Fatalf("the priority level the FlowSchema names: %v", err)
	}
	ours := classification{string(fs.UID), string(pl.UID)}

	agent := httpClientAs(t, env.ServiceAccountKubeconfig(t, "netpool-system", "netpool-agent"))
	// The API server's configuration controller takes new objects up asynchronously.
	var got classification
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := classify(ctx, agent, "/api/v1/nodes")
		if err == nil {
			got = c // the last answer's, for the failure message
		}
		return c == ours, err
	})
	if err != nil {
		t.Fatalf("the agent's GET is classified %+v, want the base's FlowSchema and level %+v: %v", got, ours, err)
	}
	if got, err := classify(ctx, agent, "/api/v1/nodes?watch=true&timeoutSeconds=1"); err != nil || got != ours {
		t.Errorf("the agent's WATCH is classified %+v (%v), want %+v", got, err, ours)
	}

	controller := httpClientAs(t, env.ServiceAccountKubeconfig(t, "netpool-system", "netpool-controller"))
	got, err = classify(ctx, controller, "/api/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	if got.flowSchema == "" || got.priorityLevel == "" {
		t.Fatalf("the controller's GET carries no classification headers: %+v", got)
	}
	if got.flowSchema == ours.flowSchema || got.priorityLevel == ours.priorityLevel {
		t.Errorf("the controller's GET is classified %+v, in the agents' schema or level %+v", got, ours)
	}
}

// httpClientAs returns an HTTP client of the identity in kubeconfig, with the API server's address.
func httpClientAs(t *testing.T, kubeconfig string) *asUser {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &asUser{client: c, host: cfg.Host}
}

// asUser is one identity's HTTP client and the API server it talks to.
type asUser struct {
	client *http.Client
	host   string
}

// classify sends GET path as u and returns the priority and fairness headers of the answer; a
// request that is not served (not 200: say, refused by RBAC) is an error.
func classify(ctx context.Context, u *asUser, path string) (classification, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.host+path, nil)
	if err != nil {
		return classification{}, err
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return classification{}, err
	}
	_ = resp.Body.Close() // a watch's stream is not read: only its headers matter
	if resp.StatusCode != http.StatusOK {
		return classification{}, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return classification{
		flowSchema:    resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID),
		priorityLevel: resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID),
	}, nil
}
