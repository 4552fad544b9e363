package gcpolicy

import "time"

// DefaultGrace is how old a reservation must be before GC may release it (the controller's
// --gc-grace, netpoolctl leaks' --grace). The plugin creates the reservation before Multus writes
// the pod's network-status, so a younger reservation missing from it is normal; two minutes is far
// beyond one ADD, even on a slow API server.
const DefaultGrace = 2 * time.Minute
