// Package gcpolicy is the one home of netpool's leak policy: which reservations have lost their
// owner, why, and how such a reservation is released without racing an ADD. The controller's GC
// acts on it; `netpoolctl leaks` and `netpoolctl release` report and release by the same code, so
// the CLI can never call a reservation leaked that the controller would keep, or the reverse.
package gcpolicy
