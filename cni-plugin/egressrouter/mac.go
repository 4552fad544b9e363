package egressrouter

import (
	"crypto/sha256"
	"net"
)

// macFromSeed derives a stable MAC from the router's identity, so that a replaced router pod keeps
// its MAC and the external network's ARP and switch tables stay right. The address is locally
// administered (bit 1 set) and unicast (bit 0 clear).
func macFromSeed(seed string) net.HardwareAddr {
	sum := sha256.Sum256([]byte("netpool-egress-router\x00" + seed))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = (mac[0] | 0x02) &^ 0x01
	return mac
}
