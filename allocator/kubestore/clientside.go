package kubestore

import (
	"errors"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// clientRefusals are the beginnings of the errors client-go's request builder (rest.Request)
// returns without sending anything: a name or namespace that cannot be a path segment, as a
// claim reference or a K8S_POD_NAME may carry. client-go gives them no type; a test
// (TestRefusedByClient) makes the real client refuse each kind, so a change of wording fails it.
var clientRefusals = []string{
	"invalid resource name ", "invalid namespace ", "resource name may not be empty",
}

// refusedByClient reports whether err is the client refusing a request before sending it: the
// same on every attempt, so it is permanent. Retried as "no answer", it would cost the call's
// whole bound and end in CNI error 11, and the runtime would retry the ADD for ever.
func refusedByClient(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	var sent *url.Error // the HTTP client wraps every transport failure in one
	if errors.As(err, &status) || errors.As(err, &sent) {
		return false
	}
	if runtime.IsNotRegisteredError(err) || meta.IsNoMatchError(err) {
		return true
	}
	for _, prefix := range clientRefusals {
		if strings.HasPrefix(err.Error(), prefix) {
			return true
		}
	}
	return false
}
