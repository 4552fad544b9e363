// Package envtest is the harness of the Kubernetes-mode tests: a real kube-apiserver and etcd,
// started through controller-runtime's envtest, with netpool's CRDs (crds/bases) installed.
//
//	env := envtest.Start(t)          // stopped by t.Cleanup
//	err := env.Client.Create(ctx, pool)
//
// A test binary whose tests can live with each other's objects shares one Env instead, which costs
// one start for the whole package:
//
//	func TestMain(m *testing.M) { os.Exit(envtest.RunShared(m.Run)) }
//	env := envtest.Shared(t)         // started by the first caller, stopped by RunShared
//
// Start runs hack/envtest-binaries.sh, so a fresh machine builds kube-apiserver and etcd itself (5-10
// minutes once, cached outside the clone; give `go test` a -timeout to match) and a warm one starts in
// about 3 seconds. Each Env has its own etcd data directory and ports, so tests may run several in
// parallel.
//
// Beyond envtest, an Env can stop and restart its apiserver and etcd on the same URL with the same
// data (StopControlPlane, StartControlPlane), for tests of what survives an apiserver restart, and
// hand out kubeconfig files for other identities (UserKubeconfig, ServiceAccountKubeconfig), for
// RBAC tests.
package envtest
