package web

import (
	"testing"

	"github.com/rollout/rollout/rollout/feature"
)

func TestRoughly(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1234: "1,230", 12431: "12,400", 12451: "12,500", 999_999: "1,000,000", 5_000_000_000: "5000000000"} {
		if got := roughly(n); got != want {
			t.Errorf("roughly(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestRampBucket: the ramp form's default is not the control, nor the
// fallback, nor a bucket serving everyone; of the rest the smallest.
func TestRampBucket(t *testing.T) {
	f := func(fallback string, buckets ...feature.Bucket) feature.Feature {
		return feature.Feature{Key: "f", Enabled: true, Salt: "f", Fallback: fallback, Buckets: buckets}
	}
	b := func(name string, n int) feature.Bucket { return feature.Bucket{Name: name, Replicas: n} }
	tests := []struct {
		name string
		f    feature.Feature
		want string
	}{
		{"control first", f("", b("control", 100), b("treatment", 10)), "treatment"},
		{"off and on", f("", b("off", 100), b("on", 100)), "on"},
		{"fallback skipped", f("A", b("A", 1), b("B", 100)), "B"},
		{"smallest of the variants", f("", b("control", 100), b("big", 50), b("small", 5)), "small"},
		{"a bucket at 100 % is skipped", f("", b("v1", 100), b("v2", 0)), "v2"},
		{"only controls", f("", b("control", 10), b("off", 10)), "control"},
	}
	for _, tt := range tests {
		if got := rampBucket(tt.f); got != tt.want {
			t.Errorf("%s: rampBucket = %q, want %q", tt.name, got, tt.want)
		}
	}
}
