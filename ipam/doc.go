// Package ipam holds netpool's pure address logic: the whereabouts-compatible IPAM configuration,
// ranges with their start/end windows and exclusions, and 128-bit address arithmetic.
//
// Nothing here does I/O: callers read files and environment variables and hand the bytes in, so that
// every rule can be table-tested and fuzzed.
package ipam
