// Package podowner tells which persistent owner a pod's attachment belongs to, by the one rule the
// node agent (which binds the owner's address on ADD) and the controller's GC (which keeps it while
// one of the owner's pods is bound) share: the IPAMClaim that the attachment's network selection
// element references (Multus' networks annotation), or the StatefulSet ordinal of the pod's name.
// A second reading of either would let the GC release what the agent still counts as the owner's.
package podowner
