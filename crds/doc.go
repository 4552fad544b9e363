// Package crds holds the generated CustomResourceDefinitions (bases/, written by hack/generate.sh
// from the API types in crds/ipam/v1alpha1 and crds/network/v1) and their tests: the output is
// current, the CRDs' rules hold on a real API server, and netpool's kubectl names stay
// unambiguous next to whereabouts' CRDs.
package crds
