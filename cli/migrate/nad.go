package migrate

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/netpool/netpool/ipam"
)

// whereaboutsType is the IPAM "type" of whereabouts.
const whereaboutsType = "whereabouts"

// maxNADConfig bounds the spec.config read from one NAD: a NAD author controls it.
const maxNADConfig = 1 << 20

// section is one whereabouts IPAM section of a NAD's config, loaded as netpool will load it once
// its type says netpool, or a section that already says netpool (Switched).
type section struct {
	Path   string // e.g. "ipam", "plugins[0].ipam"
	Config *ipam.Config
	// Switched is set for a section whose type already is netpool: a NAD switched before, whose
	// whereabouts records the migration verifies.
	Switched bool
	// ConfigurationPath is the section's configuration_path as written (ipam.Config keeps the
	// file's contents, not its name).
	ConfigurationPath string
}

// whereaboutsSections finds every IPAM section of type whereabouts in a NAD's spec.config and
// loads each with netpool's own config loader (ipam.FromNetworkConfig) as if its type were
// already netpool, so what is migrated is exactly what the plugin will read after the switch; and
// every section that already says netpool, marked Switched. A config without either gives no
// sections and no error.
func whereaboutsSections(raw []byte) ([]section, error) {
	if len(raw) > maxNADConfig {
		return nil, fmt.Errorf("spec.config is %d bytes, more than the %d read", len(raw), maxNADConfig)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("spec.config is not valid JSON: %v", err)
	}
	paths := map[string]bool{}    // the whereabouts sections
	switched := map[string]bool{} // the sections that already say netpool
	confPaths := map[string]string{}
	var problems []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v["ipam"].(map[string]any); ok && s["type"] == ipam.PluginType {
				switched[join(path, "ipam")] = true
				confPaths[join(path, "ipam")], _ = s["configuration_path"].(string)
			}
			if s, ok := v["ipam"].(map[string]any); ok && s["type"] == whereaboutsType {
				p := join(path, "ipam")
				paths[p] = true
				confPaths[p], _ = s["configuration_path"].(string)
				s["type"] = ipam.PluginType
				// whereabouts' node slices keep one IPPool per node (named after the node), which
				// this migration does not read: importing nothing would hand their addresses out again.
				if _, sliced := s["node_slice_size"]; sliced {
					problems = append(problems, p+": node_slice_size (whereabouts' per-node pools) cannot be migrated")
				}
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				if k != "ipam" {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(join(path, k), v[k])
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("", doc)
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	if len(paths)+len(switched) == 0 {
		return nil, nil
	}
	asNetpool, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	found, err := ipam.FromNetworkConfig(asNetpool)
	if err != nil {
		return nil, err
	}
	var out []section
	for _, s := range found {
		if paths[s.Path] || switched[s.Path] {
			out = append(out, section{Path: s.Path, Config: s.Config, Switched: switched[s.Path], ConfigurationPath: confPaths[s.Path]})
		}
	}
	return out, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
