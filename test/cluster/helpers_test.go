package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/netpool/netpool/test/cluster"
	"github.com/netpool/netpool/test/poll"
)

// answer is what the test image says (test/cluster/images/server).
type answer struct {
	Hostname string              `json:"hostname"`
	Addrs    map[string][]string `json:"addrs"`
	Remote   string              `json:"remote"`
}

// testNamespace creates a namespace for t, deleted when t ends.
func testNamespace(t *testing.T, c *cluster.Cluster, labels map[string]string) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-")
	ctx := context.Background()
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := c.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	// Pods need the namespace's default ServiceAccount, which the controller-manager makes.
	poll.Eventually(t, time.Minute, "the default ServiceAccount of "+name, func() error {
		_, err := c.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	return name
}

// serverPod is a pod of the test image on node, with annotations.
func serverPod(ns, name, node string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "server", Image: cluster.TestImage, ImagePullPolicy: corev1.PullNever,
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			}},
		},
	}
}

// createRunning creates pod and waits until it runs, returning it as it is then.
func createRunning(t *testing.T, c *cluster.Cluster, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return waitRunning(t, c, pod.Namespace, pod.Name)
}

func waitRunning(t *testing.T, c *cluster.Cluster, ns, name string) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	poll.Eventually(t, 2*time.Minute, "pod "+ns+"/"+name+" Running", func() error {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := c.Check(); err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("phase %s, conditions %v, containers %v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
		}
		got = p
		return nil
	})
	return got
}

// ask asks the test server at ip (a pod address the host routes to) and, with to, has that pod ask
// the server at to instead.
func ask(ip, to string) (answer, error) {
	u := "http://" + ip + ":8080/"
	if to != "" {
		u = "http://" + ip + ":8080/dial?to=" + url.QueryEscape(to)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(u)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return answer{}, fmt.Errorf("%s: %s: %s", u, resp.Status, body)
	}
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return answer{}, fmt.Errorf("%s: %w: %s", u, err, body)
	}
	return a, nil
}

// hasAddr reports whether the answer lists addr (an address without its prefix) on ifName.
func (a answer) hasAddr(ifName, addr string) bool {
	for _, s := range a.Addrs[ifName] {
		if strings.SplitN(s, "/", 2)[0] == addr {
			return true
		}
	}
	return false
}

// deletePod deletes a pod and waits until it is gone.
func deletePod(t *testing.T, c *cluster.Cluster, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("deleting pod %s/%s: %v", ns, name, err)
	}
	poll.Eventually(t, 2*time.Minute, "pod "+ns+"/"+name+" gone", func() error {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there")
	})
}
