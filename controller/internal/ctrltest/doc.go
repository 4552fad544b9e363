// Package ctrltest is the test support of the controller's reconcilers: the fixture that makes a
// test's API objects on the package's shared API server and removes them after it, a manager that
// runs the reconcilers under test over the controller's own cache and indexes, a settable clock,
// and fakes for the unit tests of error paths. Only tests import it.
//
// Each reconciler package runs its tests against one kube-apiserver:
//
//	func TestMain(m *testing.M) { os.Exit(envtest.RunShared(m.Run)) }
//
//	f := ctrltest.NewFixture(t, nil)         // the shared Env, with the NAD CRD; a namespace
//	m := ctrltest.StartManager(t, nil, ctrltest.TestOptions(), setup)
//
// The tests of one package run one at a time: the fixture's cleanup removes every netpool object,
// node and pod of the cluster, so each test's manager finds a clean cluster.
package ctrltest
