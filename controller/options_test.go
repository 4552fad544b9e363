package controller

import (
	"flag"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

func TestDefaultOptionsAreValidAndRaiseTheClientLimits(t *testing.T) {
	o := DefaultOptions()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.QPS <= 5 || o.Burst <= 10 {
		t.Fatalf("QPS %v and burst %d do not exceed client-go's 5 and 10", o.QPS, o.Burst)
	}
}

func TestBindFlags(t *testing.T) {
	o := DefaultOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.BindFlags(fs)
	err := fs.Parse([]string{"--gc-grace=30s", "--dry-run", "--kube-api-qps=50.5", "--kube-api-burst=99", "--gc-workers=2",
		"--leader-elect=false", "--slice-grace=1h", "--gc-sweep-interval=1m", "--pool-status-interval=2s", "--pool-status-fanout=50", "--metrics-bind-address=0"})
	if err != nil {
		t.Fatal(err)
	}
	if o.GCGrace != 30*time.Second || !o.DryRun || o.QPS != 50.5 || o.Burst != 99 || o.GCWorkers != 2 || o.LeaderElection ||
		o.SliceGrace != time.Hour || o.SweepInterval != time.Minute || o.PoolStatusInterval != 2*time.Second || o.PoolStatusFanout != 50 || o.MetricsBindAddress != "0" {
		t.Fatalf("parsed %+v", o)
	}
	// Every flag documents its default.
	fs.VisitAll(func(f *flag.Flag) {
		if f.Usage == "" {
			t.Errorf("flag --%s has no usage", f.Name)
		}
	})
}

func TestValidateNamesTheFlagAndValue(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"grace", func(o *Options) { o.GCGrace = 0 }, "--gc-grace 0s must be positive"},
		{"sweep", func(o *Options) { o.SweepInterval = -time.Second }, "--gc-sweep-interval -1s must be positive"},
		{"slice grace", func(o *Options) { o.SliceGrace = 0 }, "--slice-grace 0s must be positive"},
		{"status interval", func(o *Options) { o.PoolStatusInterval = 0 }, "--pool-status-interval 0s must be positive"},
		{"status fanout", func(o *Options) { o.PoolStatusFanout = -1 }, "--pool-status-fanout -1 must be a finite number, 0 or more"},
		{"status fanout NaN", func(o *Options) { o.PoolStatusFanout = math.NaN() }, "--pool-status-fanout NaN must be a finite number, 0 or more"},
		{"status fanout Inf", func(o *Options) { o.PoolStatusFanout = math.Inf(1) }, "--pool-status-fanout +Inf must be a finite number, 0 or more"},
		{"qps", func(o *Options) { o.QPS = 0 }, "--kube-api-qps 0 must be positive"},
		{"burst", func(o *Options) { o.Burst = 0 }, "--kube-api-burst 0 must be at least 1"},
		{"workers", func(o *Options) { o.GCWorkers = 0 }, "--gc-workers 0 must be at least 1"},
		{"lease id", func(o *Options) { o.LeaderElectionID = "" }, "--leader-election-id must not be empty"},
		{"lease namespace", func(o *Options) { o.LeaderElectionNamespace = "" }, "--leader-election-namespace must not be empty"},
		{"renew after expiry", func(o *Options) { o.RenewDeadline = o.LeaseDuration },
			"--leader-election-renew-deadline 15s must be less than --leader-election-lease-duration 15s"},
		{"retry period", func(o *Options) { o.RetryPeriod = 0 }, "--leader-election-retry-period 0s must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.change(&o)
			err := o.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), "invalid options: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
	o := DefaultOptions()
	o.LeaderElection, o.LeaderElectionID, o.RenewDeadline = false, "", time.Hour
	if err := o.Validate(); err != nil {
		t.Fatalf("leader election settings matter only with leader election: %v", err)
	}
}
