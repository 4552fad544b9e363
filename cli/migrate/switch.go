package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/ipam"
)

// The switch with no window (--switch-nads), in this order:
//
//  1. plan and dry-run as any run does; anything blocked stops it with nothing written;
//  2. lock the whereabouts IPPool of every range of the NADs to switch (lock.go): from then on
//     whereabouts commits no allocation from them, and every allocation it committed is in them;
//  3. read and plan again, and import: this import sees the last whereabouts allocation there
//     will ever be. If it is blocked, the pools locked in step 2 are unlocked and nothing is
//     switched;
//  4. switch each NAD: its whereabouts sections' "type" becomes "netpool", and no other byte of
//     spec.config changes (an update of the NAD as read in step 3, so an edit made meanwhile fails
//     the update instead of being overwritten);
//  5. verify.
//
// ADDs of these networks fail while the pools are locked and the NADs not yet switched (the
// kubelet retries them, and Multus then reads the switched NAD); DELs succeed throughout. The
// lock stays after the switch: a Multus that read a NAD before step 4 may still call whereabouts,
// which must not allocate. A failure after step 2 leaves the pools locked (never a window); a
// second run finishes the switch.

// switchTarget is one whereabouts IPPool to lock.
type switchTarget struct {
	namespace, name string
	subnet          netip.Prefix
}

// switchNADs runs steps 2-4 on p, the plan of step 1, and returns the plan of step 3.
func switchNADs(ctx context.Context, c kubeclient.Client, o Options, p *plan) (*plan, error) {
	targets, err := p.lockTargets(o.WhereaboutsNamespace)
	if err != nil {
		return p, err
	}
	if p.scoped {
		if err := checkShared(ctx, c, o.Namespace, targets); err != nil {
			return p, err
		}
	}
	var lockedNow []switchTarget
	unlock := func() error {
		var errs []error
		for _, t := range lockedNow {
			errs = append(errs, unlockPool(ctx, c, t.namespace, t.name, t.subnet))
		}
		return errors.Join(errs...)
	}
	for _, t := range targets {
		did, err := lockPool(ctx, c, t.namespace, t.name, t.subnet)
		if err != nil {
			return p, errors.Join(err, unlock())
		}
		if did {
			lockedNow = append(lockedNow, t)
		}
		p.progress.say("locked whereabouts IPPool %s/%s", t.namespace, t.name)
	}
	// Whereabouts allocates no more from these pools: what the import reads now is final.
	after, err := planRun(ctx, c, o, p.progress)
	if err != nil {
		return p, errors.Join(err, unlock())
	}
	if after.report.Blocked() {
		return after, errors.Join(fmt.Errorf("after locking whereabouts' pools, %d conflicts and %d invalid entries: nothing was written, and the pools are unlocked",
			after.report.Summary.Conflicts, after.report.Summary.Invalid), unlock())
	}
	// The import's own failure leaves nothing that unlocking could make wrong: whatever it
	// created is what whereabouts already gave, to the same attachments.
	after.report.Applied = true
	if err := after.write(ctx, c, false); err != nil {
		return after, errors.Join(err, unlock())
	}
	// The pools' Locked comes from the second read: a pool the lock created is read too.
	if err := after.switchEach(ctx, c); err != nil {
		return after, fmt.Errorf("%w (whereabouts' pools stay locked, so no address can be given twice; run again to finish the switch)", err)
	}
	return after, nil
}

// lockTargets lists the whereabouts IPPools of every range of the NADs the run switches: the pool
// whereabouts keeps (resolvePool found it), or, where it has none yet, the one it would create in
// namespace.
func (p *plan) lockTargets(namespace string) ([]switchTarget, error) {
	if namespace == "" {
		namespace = "kube-system"
	}
	seen := map[string]bool{}
	var out []switchTarget
	for i, n := range p.report.NADs {
		if n.Switched || n.Error != "" {
			continue
		}
		c := p.configs[i]
		for _, r := range c.Ranges {
			name := wbPoolName(c.NetworkName, r.Subnet)
			t := switchTarget{namespace: namespace, name: name, subnet: r.Subnet}
			if found := p.wbByName[name]; len(found) == 1 {
				t.namespace = found[0].Namespace
			} else if len(found) > 1 {
				return nil, fmt.Errorf("whereabouts IPPool %s exists in several namespaces", name) // resolvePool made it invalid
			}
			if key := t.namespace + "/" + t.name; !seen[key] {
				seen[key] = true
				out = append(out, t)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].namespace+"/"+out[i].name < out[j].namespace+"/"+out[j].name })
	return out, nil
}

// checkShared refuses a switch limited to one namespace whose whereabouts pools NADs of another
// namespace use: locking them would fail those NADs' ADDs, and switching only some NADs of a pool
// leaves the others allocating from it.
func checkShared(ctx context.Context, c kubeclient.Reader, namespace string, targets []switchTarget) error {
	locked := map[string]bool{}
	for _, t := range targets {
		locked[t.name] = true
	}
	var all nadv1.NetworkAttachmentDefinitionList
	if err := c.List(ctx, &all); err != nil {
		return fmt.Errorf("failed to list NetworkAttachmentDefinitions: %w", err)
	}
	var others []string
	for _, nad := range all.Items {
		if nad.Namespace == namespace {
			continue
		}
		sections, err := whereaboutsSections([]byte(nad.Spec.Config))
		if err != nil {
			continue
		}
		for _, s := range sections {
			for _, r := range s.Config.Ranges {
				if name := wbPoolName(s.Config.NetworkName, r.Subnet); !s.Switched && locked[name] {
					others = append(others, fmt.Sprintf("%s/%s (whereabouts IPPool %s)", nad.Namespace, nad.Name, name))
				}
			}
		}
	}
	if len(others) > 0 {
		sort.Strings(others)
		return fmt.Errorf("--switch-nads -n %s: NADs of other namespaces use the same whereabouts pools: %s; run without -n to switch them together",
			namespace, strings.Join(others, ", "))
	}
	return nil
}

// switchEach switches the NADs of the report that still say whereabouts, one update each.
func (p *plan) switchEach(ctx context.Context, c kubeclient.Client) error {
	paths := map[string][]string{} // namespace/name -> section paths
	var order []string
	for _, n := range p.report.NADs {
		if n.Switched || n.Error != "" {
			continue
		}
		key := n.Namespace + "/" + n.Name
		if paths[key] == nil {
			order = append(order, key)
		}
		paths[key] = append(paths[key], n.Path)
	}
	byKey := map[string]*nadv1.NetworkAttachmentDefinition{}
	for i := range p.nads {
		byKey[p.nads[i].Namespace+"/"+p.nads[i].Name] = &p.nads[i]
	}
	for _, key := range order {
		nad := byKey[key]
		if nad == nil {
			return fmt.Errorf("NAD %s was not read", key)
		}
		config, err := switchConfig([]byte(nad.Spec.Config), paths[key])
		if err != nil {
			return fmt.Errorf("NAD %s: %w", key, err)
		}
		nad = nad.DeepCopy()
		nad.Spec.Config = string(config)
		if err := c.Update(ctx, nad); err != nil {
			if apierrors.IsConflict(err) {
				return fmt.Errorf("NAD %s changed since it was read, so it was not switched: %w", key, err)
			}
			return fmt.Errorf("failed to switch NAD %s: %w", key, err)
		}
		for i := range p.report.NADs {
			if n := &p.report.NADs[i]; n.Namespace+"/"+n.Name == key && !n.Switched && n.Error == "" {
				n.SwitchedNow = true
			}
		}
		p.progress.say("switched NAD %s to netpool", key)
	}
	return nil
}

// switchConfig rewrites, in a NAD's spec.config, the "type" of each IPAM section at paths (as
// whereaboutsSections names them) from "whereabouts" to "netpool", and changes no other byte.
func switchConfig(raw []byte, paths []string) ([]byte, error) {
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	type span struct{ start, end int64 }
	var edits []span
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return nil // a scalar
		}
		switch d {
		case '{':
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				if k == "type" && want[path] {
					before := dec.InputOffset()
					vt, err := dec.Token()
					if err != nil {
						return err
					}
					if v, ok := vt.(string); ok && v == whereaboutsType {
						after := dec.InputOffset()
						quote := bytes.IndexByte(raw[before:after], '"')
						if quote < 0 {
							return fmt.Errorf("%s.type: cannot locate the value", path)
						}
						edits = append(edits, span{before + int64(quote), after})
					} else if _, isDelim := vt.(json.Delim); isDelim {
						return fmt.Errorf("%s.type is not a string", path)
					}
					continue
				}
				if err := walk(join(path, k)); err != nil {
					return err
				}
			}
		case '[':
			for i := 0; dec.More(); i++ {
				if err := walk(fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
		_, err = dec.Token() // the closing delimiter
		return err
	}
	if err := walk(""); err != nil {
		return nil, fmt.Errorf("spec.config: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("spec.config: data after the top-level value")
	}
	if len(edits) == 0 {
		return nil, fmt.Errorf("spec.config: no whereabouts section at %s", strings.Join(paths, ", "))
	}
	var out bytes.Buffer
	last := int64(0)
	for _, e := range edits {
		out.Write(raw[last:e.start])
		out.WriteString(`"` + ipam.PluginType + `"`)
		last = e.end
	}
	out.Write(raw[last:])
	// What the switch leaves must be what netpool reads: no whereabouts section at those paths.
	sections, err := whereaboutsSections(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("spec.config after the switch: %w", err)
	}
	for _, s := range sections {
		if want[s.Path] && !s.Switched {
			return nil, fmt.Errorf("spec.config: %s still says whereabouts after the switch", s.Path)
		}
	}
	return out.Bytes(), nil
}
