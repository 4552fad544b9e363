package egressrouter

import (
	"fmt"
	"reflect"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
)

// checkTable compares the table in the namespace with the one ADD installs for r: the same base
// chains (type, hook, priority, policy) and, in each, the same rules in the same order, each with
// its comment and the same expressions, compared one by one.
func checkTable(conn *nftables.Conn, r *Router, egressIf string) error {
	found, err := hasTable(conn)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: nftables table inet %s is missing", ErrCheckFailed, TableName)
	}
	all, err := conn.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("failed to list nftables chains: %w", err)
	}
	have := map[string]*nftables.Chain{}
	for _, c := range all {
		if c.Table.Name == TableName {
			have[c.Name] = c
		}
	}
	want := chains(r, egressIf)
	if len(have) != len(want) {
		return fmt.Errorf("%w: table inet %s has %d chains, want %d", ErrCheckFailed, TableName, len(have), len(want))
	}
	for _, w := range want {
		c, ok := have[w.name]
		if !ok {
			return fmt.Errorf("%w: table inet %s has no chain %s", ErrCheckFailed, TableName, w.name)
		}
		if err := checkChain(conn, c, w); err != nil {
			return err
		}
	}
	return nil
}

func checkChain(conn *nftables.Conn, c *nftables.Chain, w chainSpec) error {
	if c.Type != w.typ || c.Hooknum == nil || *c.Hooknum != *w.hook || c.Priority == nil || *c.Priority != *w.priority ||
		c.Policy == nil || *c.Policy != w.policy {
		return fmt.Errorf("%w: chain %s of table inet %s is not a %s chain at hook %d, priority %d, policy %d",
			ErrCheckFailed, w.name, TableName, w.typ, *w.hook, *w.priority, w.policy)
	}
	rules, err := conn.GetRules(table, c)
	if err != nil {
		return fmt.Errorf("failed to list the rules of chain %s: %w", w.name, err)
	}
	if len(rules) != len(w.rules) {
		return fmt.Errorf("%w: chain %s holds %d rules, want %d", ErrCheckFailed, w.name, len(rules), len(w.rules))
	}
	for i, want := range w.rules {
		got, _ := userdata.GetString(rules[i].UserData, userdata.TypeComment)
		if got != want.desc || len(rules[i].Exprs) != len(want.exprs) {
			return fmt.Errorf("%w: rule %d of chain %s is %q with %d expressions, want %q with %d",
				ErrCheckFailed, i, w.name, got, len(rules[i].Exprs), want.desc, len(want.exprs))
		}
		for j := range want.exprs {
			if !reflect.DeepEqual(rules[i].Exprs[j], want.exprs[j]) {
				return fmt.Errorf("%w: rule %d (%q) of chain %s differs at expression %d: %#v, want %#v",
					ErrCheckFailed, i, want.desc, w.name, j, rules[i].Exprs[j], want.exprs[j])
			}
		}
	}
	return nil
}
