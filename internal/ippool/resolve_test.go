package ippool

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// TestResolve: a config that agrees with the pool, or leaves a rule out, draws by the pool's
// rules; each disagreement is the error, and the rules are then what the config still releases
// by: its own overlapping mode, the pool's cool-down and statefulSets.
func TestResolve(t *testing.T) {
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: ipamv1.IPPoolSpec{
		Range: "10.0.0.0/24", OverlappingRanges: ipamv1.OverlappingRangesEnabled, ReuseCooldown: "1h",
		StatefulSets: ipamv1.StatefulSetsSticky,
	}}
	want := Rules{Overlapping: true, Cooldown: time.Hour, Sticky: true}
	for _, tt := range []struct {
		name, ipam, wantErr string
		releaseBy           *Rules // the rules with the error; want when nil
	}{
		{name: "silent config follows the pool", ipam: `{"range":"10.0.0.0/24"}`},
		{name: "agreeing config", ipam: `{"range":"10.0.0.0/24","enable_overlapping_ranges":true,"reuseCooldown":"1h","statefulSets":"Sticky"}`},
		{name: "cool-down disagrees", ipam: `{"range":"10.0.0.0/24","reuseCooldown":"1m"}`, wantErr: "reuseCooldown"},
		{name: "statefulSets disagrees", ipam: `{"range":"10.0.0.0/24","statefulSets":"None"}`, wantErr: "statefulSets None disagrees"},
		{name: "overlapping disagrees", ipam: `{"range":"10.0.0.0/24","enable_overlapping_ranges":false}`, wantErr: "enable_overlapping_ranges",
			releaseBy: &Rules{Overlapping: false, Cooldown: time.Hour, Sticky: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ipam.Load([]byte(`{"name":"n","ipam":`+tt.ipam+`}`), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Resolve(pool, c)
			if err == nil && got != want {
				t.Errorf("rules %+v, want the pool's %+v", got, want)
			}
			if releaseBy := want; err != nil {
				if tt.releaseBy != nil {
					releaseBy = *tt.releaseBy
				}
				if got != releaseBy {
					t.Errorf("rules %+v with the error %v, want %+v to release by", got, err, releaseBy)
				}
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
