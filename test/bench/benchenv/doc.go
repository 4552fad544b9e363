// Package benchenv starts what the Kubernetes benches run on: one envtest kube-apiserver + etcd
// with netpool's CRDs, the admin's client, and the context of a bench's run. test/envtest does the
// same for tests, through testing.TB; a bench is a program and reports its errors instead.
package benchenv
