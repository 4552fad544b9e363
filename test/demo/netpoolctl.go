package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
)

// netpoolctl runs the built netpoolctl against the demo's bbolt file, as an operator on a bare
// host would, and returns what it printed.
func netpoolctl(ctx context.Context, bin, db string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"--db", db}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("netpoolctl --db %s %s: %w: %s", db, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// showWithNetpoolctl prints netpoolctl's pools, show and whois for the demo's allocations, and
// checks that they name every attachment: the embedded quick start in the README is this output.
// held maps each pod (namespace/name) to its address; it must not be empty.
func showWithNetpoolctl(ctx context.Context, bin, db string, subnet netip.Prefix, held map[string]netip.Addr) error {
	if len(held) == 0 {
		return fmt.Errorf("no allocation to show")
	}
	pools, err := netpoolctl(ctx, bin, db, "pools")
	if err != nil {
		return err
	}
	command("netpoolctl --db %s pools", db)
	output(pools)

	// The pool's name as netpoolctl spells it, read from its json rather than assumed.
	js, err := netpoolctl(ctx, bin, db, "pools", "-o", "json")
	if err != nil {
		return err
	}
	var list struct {
		Items []struct {
			Name  string `json:"name"`
			Range string `json:"range"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(js), &list); err != nil {
		return fmt.Errorf("netpoolctl pools -o json: %w", err)
	}
	var pool string
	for _, p := range list.Items {
		if p.Range == subnet.String() {
			pool = p.Name
		}
	}
	if pool == "" {
		return fmt.Errorf("netpoolctl pools lists no pool of %s: %s", subnet, js)
	}

	show, err := netpoolctl(ctx, bin, db, "show", pool)
	if err != nil {
		return err
	}
	command("netpoolctl --db %s show %s", db, pool)
	output(show)
	for pod, a := range held {
		if !strings.Contains(show, a.String()) || !strings.Contains(show, pod) {
			return fmt.Errorf("netpoolctl show %s does not list %s of %s:\n%s", pool, a, pod, show)
		}
	}

	// One address shows the form: the first pod's, by name, so every run prints the same one.
	first := slices.Sorted(maps.Keys(held))[0]
	whois, err := netpoolctl(ctx, bin, db, "whois", held[first].String())
	if err != nil {
		return err
	}
	command("netpoolctl --db %s whois %s", db, held[first])
	output(whois)
	if !strings.Contains(whois, first) || !strings.Contains(whois, "Held") {
		return fmt.Errorf("netpoolctl whois %s does not name its holder %s:\n%s", held[first], first, whois)
	}
	return nil
}
