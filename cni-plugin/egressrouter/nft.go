package egressrouter

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// TableName is the nftables table (family inet) that holds everything the plugin installs.
const TableName = "netpool_egress"

// chainSpec is one base chain of the table and its rules, in order.
type chainSpec struct {
	name     string
	typ      nftables.ChainType
	hook     *nftables.ChainHook
	priority *nftables.ChainPriority
	policy   nftables.ChainPolicy
	rules    []ruleSpec
}

// ruleSpec is one rule and the description it is stored under (as its nft comment), by which
// CHECK recognises it.
type ruleSpec struct {
	desc  string
	exprs []expr.Any
}

var table = &nftables.Table{Name: TableName, Family: nftables.TableFamilyINet}

// chains is the whole table for r with egress interface egressIf, as r's mode builds it.
func chains(r *Router, egressIf string) []chainSpec { return r.Mode.chains(r, egressIf) }

// chains is the Redirect mode's table:
//   - prerouting (dstnat): for traffic arriving on the cluster interface to one of the pod's own
//     addresses, each rule's port and protocol DNAT to destination:targetPort; the fallback of
//     each family last;
//   - postrouting (srcnat): SNAT to the router's address for everything leaving the egress link;
//   - forward (filter, policy drop): replies and related packets, and new flows from the cluster
//     interface to the egress link that were DNAT'd above; nothing else, so the external network
//     cannot reach the cluster side through the router;
//   - input (filter): for a family without a fallback, unmatched TCP is reset and UDP and SCTP get
//     port-unreachable, so clients fail fast instead of timing out.
func (rd *Redirect) chains(r *Router, egressIf string) []chainSpec {
	pre := chainSpec{name: "prerouting", typ: nftables.ChainTypeNAT, hook: nftables.ChainHookPrerouting,
		priority: nftables.ChainPriorityNATDest, policy: nftables.ChainPolicyAccept}
	for _, rule := range rd.Rules {
		pre.rules = append(pre.rules, dnatRule(r.ClusterInterface, rule))
	}
	if rd.Fallback.IsValid() {
		pre.rules = append(pre.rules, fallbackRule(r.ClusterInterface, rd.Fallback))
	}
	post := chainSpec{name: "postrouting", typ: nftables.ChainTypeNAT, hook: nftables.ChainHookPostrouting,
		priority: nftables.ChainPriorityNATSource, policy: nftables.ChainPolicyAccept}
	for _, a := range r.Addresses {
		post.rules = append(post.rules, snatRule(egressIf, a.Prefix.Addr()))
	}
	fwd := chainSpec{name: "forward", typ: nftables.ChainTypeFilter, hook: nftables.ChainHookForward,
		priority: nftables.ChainPriorityFilter, policy: nftables.ChainPolicyDrop,
		rules: []ruleSpec{
			{"accept replies", concat(ctBits(expr.CtKeySTATE, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED), accept())},
			{fmt.Sprintf("accept redirected %s -> %s", r.ClusterInterface, egressIf), concat(
				ifName(expr.MetaKeyIIFNAME, r.ClusterInterface), ifName(expr.MetaKeyOIFNAME, egressIf),
				ctBits(expr.CtKeySTATUS, 1<<5 /* IPS_DST_NAT */), accept())},
		}}
	in := chainSpec{name: "input", typ: nftables.ChainTypeFilter, hook: nftables.ChainHookInput,
		priority: nftables.ChainPriorityFilter, policy: nftables.ChainPolicyAccept}
	for _, a := range r.Addresses {
		is4 := a.Prefix.Addr().Is4()
		if rd.Fallback.IsValid() && rd.Fallback.Is4() == is4 {
			continue
		}
		in.rules = append(in.rules, rejectRules(r.ClusterInterface, is4)...)
	}
	return []chainSpec{pre, post, fwd, in}
}

func dnatRule(clusterIf string, rule Rule) ruleSpec {
	return ruleSpec{
		desc: fmt.Sprintf("dnat %s %d -> %s", rule.Protocol, rule.Port, netip.AddrPortFrom(rule.Destination, rule.TargetPort)),
		exprs: concat(
			ifName(expr.MetaKeyIIFNAME, clusterIf), nfproto(rule.Destination.Is4()), toLocal(),
			l4proto(rule.Protocol), dport(rule.Port),
			[]expr.Any{
				&expr.Immediate{Register: 1, Data: rule.Destination.AsSlice()},
				&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(rule.TargetPort)},
				// Written as the kernel reports it back (max = min, port range flagged), so CHECK can
				// compare expression by expression.
				&expr.NAT{Type: expr.NATTypeDestNAT, Family: natFamily(rule.Destination.Is4()),
					RegAddrMin: 1, RegAddrMax: 1, RegProtoMin: 2, RegProtoMax: 2, Specified: true},
			}),
	}
}

func fallbackRule(clusterIf string, fallback netip.Addr) ruleSpec {
	return ruleSpec{
		desc: fmt.Sprintf("dnat fallback -> %s", fallback),
		exprs: concat(
			ifName(expr.MetaKeyIIFNAME, clusterIf), nfproto(fallback.Is4()), toLocal(),
			[]expr.Any{
				&expr.Immediate{Register: 1, Data: fallback.AsSlice()},
				&expr.NAT{Type: expr.NATTypeDestNAT, Family: natFamily(fallback.Is4()), RegAddrMin: 1, RegAddrMax: 1},
			}),
	}
}

func snatRule(egressIf string, addr netip.Addr) ruleSpec {
	return ruleSpec{
		desc: fmt.Sprintf("snat %s -> %s", egressIf, addr),
		exprs: concat(
			ifName(expr.MetaKeyOIFNAME, egressIf), nfproto(addr.Is4()),
			[]expr.Any{
				&expr.Immediate{Register: 1, Data: addr.AsSlice()},
				&expr.NAT{Type: expr.NATTypeSourceNAT, Family: natFamily(addr.Is4()), RegAddrMin: 1, RegAddrMax: 1},
			}),
	}
}

func rejectRules(clusterIf string, is4 bool) []ruleSpec {
	fam := "ipv6"
	if is4 {
		fam = "ipv4"
	}
	newFrom := concat(ifName(expr.MetaKeyIIFNAME, clusterIf), nfproto(is4), ctBits(expr.CtKeySTATE, expr.CtStateBitNEW))
	return []ruleSpec{
		{fmt.Sprintf("reject unmatched %s tcp", fam), concat(newFrom, l4proto("TCP"),
			[]expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}})},
		{fmt.Sprintf("reject unmatched %s udp", fam), concat(newFrom, l4proto("UDP"),
			[]expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_PORT_UNREACH}})},
		{fmt.Sprintf("reject unmatched %s sctp", fam), concat(newFrom, l4proto("SCTP"),
			[]expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_PORT_UNREACH}})},
	}
}

func concat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func eq(data []byte) *expr.Cmp { return &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data} }

// ifName matches the input or output interface by name (padded as the kernel stores it), so the
// rule survives the interface being re-created with another index.
func ifName(key expr.MetaKey, name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, eq(b)}
}

func nfproto(is4 bool) []expr.Any {
	p := byte(unix.NFPROTO_IPV6)
	if is4 {
		p = unix.NFPROTO_IPV4
	}
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, eq([]byte{p})}
}

func natFamily(is4 bool) uint32 {
	if is4 {
		return unix.NFPROTO_IPV4
	}
	return unix.NFPROTO_IPV6
}

// toLocal matches packets for one of the namespace's own addresses ("fib daddr type local").
func toLocal() []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		eq(binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)),
	}
}

var protocols = map[string]byte{"TCP": unix.IPPROTO_TCP, "UDP": unix.IPPROTO_UDP, "SCTP": unix.IPPROTO_SCTP}

func l4proto(p string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, eq([]byte{protocols[p]})}
}

// dport matches the destination port, at offset 2 of the TCP, UDP and SCTP headers alike.
func dport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		eq(binary.BigEndian.AppendUint16(nil, port)),
	}
}

// ctBits matches when any of bits is set in the conntrack state or status.
func ctBits(key expr.CtKey, bits uint32) []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: key},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

func accept() []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}} }

// installTable replaces the table, in one transaction, with the chains of r.
func installTable(conn *nftables.Conn, r *Router, egressIf string) error {
	conn.AddTable(table)
	conn.DelTable(table) // the add makes the delete safe when there is no table yet
	conn.AddTable(table)
	for _, c := range chains(r, egressIf) {
		policy := c.policy
		chain := conn.AddChain(&nftables.Chain{Name: c.name, Table: table, Type: c.typ, Hooknum: c.hook,
			Priority: c.priority, Policy: &policy})
		for _, rule := range c.rules {
			conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: rule.exprs,
				UserData: userdata.AppendString(nil, userdata.TypeComment, rule.desc)})
		}
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("failed to install nftables table inet %s: %w", TableName, err)
	}
	return nil
}

// removeTable deletes the table if it exists.
func removeTable(conn *nftables.Conn) error {
	found, err := hasTable(conn)
	if err != nil || !found {
		return err
	}
	conn.DelTable(table)
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("failed to delete nftables table inet %s: %w", TableName, err)
	}
	return nil
}

// hasTable reports whether the namespace holds the table.
func hasTable(conn *nftables.Conn) (bool, error) {
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, fmt.Errorf("failed to list nftables tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == TableName {
			return true, nil
		}
	}
	return false, nil
}
