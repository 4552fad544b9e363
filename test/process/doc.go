// Package process tests the built netpool plugin as a runtime runs it, one process per CNI call:
// concurrent ADDs on one bbolt file, DEL storms, kill -9 mid-call, lock timeouts, corrupt and full
// files, and the page-graph walk that answers a damaged file with 105 instead of a crash.
package process
