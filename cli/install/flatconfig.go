package install

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/netpool/netpool/ipam"
)

// FlatConfig is the node-wide part of every netpool NAD on the node: the global flat file that
// the plugin reads under the NAD's own ipam section (the section wins field by field).
type FlatConfig struct {
	Datastore   string
	AgentSocket string
	BboltPath   string
	LockTimeout time.Duration
	LogLevel    string
	LogFile     string
}

// Marshal renders the file and checks it the way the plugin will read it, so a flag the plugin
// would refuse is refused here, before anything is written.
func (f *FlatConfig) Marshal() ([]byte, error) {
	w := map[string]any{}
	if f.Datastore != "" {
		w["datastore"] = f.Datastore
	}
	if f.AgentSocket != "" {
		w["kubernetes"] = map[string]any{"agent_socket": f.AgentSocket}
	}
	bbolt := map[string]any{}
	if f.BboltPath != "" {
		bbolt["path"] = f.BboltPath
	}
	if f.LockTimeout != 0 {
		bbolt["lock_timeout"] = f.LockTimeout.String()
	}
	if len(bbolt) > 0 {
		w["bbolt"] = bbolt
	}
	if f.LogLevel != "" {
		w["log_level"] = f.LogLevel
	}
	if f.LogFile != "" {
		w["log_file"] = f.LogFile
	}
	data, err := json.MarshalIndent(w, "", "  ")
	if err != nil {
		return nil, err
	}
	data = append(data, '\n')
	// A NAD that names only a range, read over this file, must load: that is what every NAD on
	// the node will do.
	probe := []byte(`{"cniVersion":"1.1.0","name":"probe","ipam":{"type":"netpool","range":"192.0.2.0/24"}}`)
	if _, err := ipam.Load(probe, "", func(string) ([]byte, error) { return data, nil }); err != nil {
		return nil, fmt.Errorf("the flat config would not load: %w", err)
	}
	return data, nil
}
