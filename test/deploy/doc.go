// Package deploy tests the kustomizations under deploy/: each renders with the kustomize library,
// names netpool's one image, and applies with a server-side dry run to a real API server.
package deploy
