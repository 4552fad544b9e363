// Package e2e attaches real network namespaces through libcni with netpool as the IPAM plugin of
// the reference bridge and macvlan plugins, and checks what the kernel ends up holding: addresses,
// TCP connectivity, and that DEL and GC give addresses back. The tests need root; they skip
// otherwise.
package e2e
