// Package derivedpool is the reconciler that removes the pools derived from NADs' inline ranges
// once no NAD uses them and they hold nothing. It starts with the NAD reconciler, once the NAD CRD
// is served.
package derivedpool
