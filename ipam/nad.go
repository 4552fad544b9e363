package ipam

import (
	"encoding/json"
	"fmt"
	"sort"
)

// PluginType is the CNI type name of the netpool IPAM plugin.
const PluginType = "netpool"

// Section is one netpool IPAM section found in a network configuration, loaded and validated.
type Section struct {
	// Path locates the section in the document, e.g. "plugins[1].ipam", for error messages and events.
	Path   string
	Config *Config
}

// FromNetworkConfig finds every netpool IPAM section in a CNI network configuration, as a
// NetworkAttachmentDefinition's spec.config holds it: a single plugin config or a conflist, with
// sections nested at any depth (a plugin's "plugins", a meta plugin's "delegates"). Each section is
// loaded with the document's cniVersion and name, exactly as the plugin would load it at ADD time,
// so a config the controller accepts is one the plugin accepts. A document without netpool IPAM
// returns no sections and no error.
func FromNetworkConfig(raw []byte) ([]Section, error) {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, configErr("config", "", "not valid JSON: %v", err)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, configErr("config", "", "must be a JSON object")
	}
	version, _ := top["cniVersion"].(string)
	name, _ := top["name"].(string)
	var found []Section
	var walk func(path string, v any) error
	walk = func(path string, v any) error {
		switch v := v.(type) {
		case map[string]any:
			if section, ok := v["ipam"].(map[string]any); ok && section["type"] == PluginType {
				c, err := loadSection(version, name, v["allowPersistentIPs"], section)
				if err != nil {
					return fmt.Errorf("%s: %w", join(path, "ipam"), err)
				}
				found = append(found, Section{Path: join(path, "ipam"), Config: c})
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				if k != "ipam" {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys) // a stable order keeps events and errors stable
			for _, k := range keys {
				if err := walk(join(path, k), v[k]); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range v {
				if err := walk(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("", top); err != nil {
		return nil, err
	}
	return found, nil
}

// loadSection loads one section as the plugin sees it: the plugin's config around it passes its
// allowPersistentIPs (top, nil when unset) along, as a plugin passes its whole config to IPAM.
func loadSection(version, name string, top any, section map[string]any) (*Config, error) {
	doc := map[string]any{"cniVersion": version, "name": name, "ipam": section}
	if top != nil {
		doc["allowPersistentIPs"] = top
	}
	conf, err := json.Marshal(doc)
	if err != nil {
		return nil, configErr("ipam", "", "%v", err)
	}
	return Load(conf, "", nil)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
