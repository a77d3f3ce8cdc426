package feature

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rollout/rollout/ring"
)

// splitServe is a split of off and on on a ring of those replicas, its
// shares the ring's exact ones.
func splitServe(off, on int) Serve {
	rb := []SplitBucket{{Name: "off", Replicas: off}, {Name: "on", Replicas: on}}
	r, _ := ring.New(SplitRingBuckets(rb)...)
	shares := r.Shares()
	return Serve{Split: map[string]float64{"off": shares["off"], "on": 1 - shares["off"]}, SplitRing: rb}
}

func TestSplitRuleEvaluation(t *testing.T) {
	pro := Rule{Name: "pro", Conditions: []Condition{cond("plan", OpEq, "pro")}, Serve: splitServe(2000, 2000)}
	staff := Rule{Name: "staff", Conditions: []Condition{cond("email", OpEndsWith, "@example.com")}, Serve: Serve{Bucket: "on"}}
	f := targeted([]Rule{pro})
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	c := compile(f)
	ctx := Context{"plan": "pro"}
	e := c.peekContext("u1", ctx)
	if e.Reason != ReasonSplit || e.Rule != "pro" || e.OpenFeatureReason() != "SPLIT" {
		t.Errorf("peekContext = %+v (%s), want reason split, rule pro, SPLIT", e, e.OpenFeatureReason())
	}
	// Renamed, moved behind another rule, with that rule added: no user
	// of the split changes bucket.
	renamed := pro
	renamed.Name = "pro-customers"
	g := targeted([]Rule{staff, renamed})
	d := compile(g)
	on := 0
	for i := range 4000 {
		user := fmt.Sprintf("user-%d", i)
		a, b := c.peekContext(user, ctx), d.peekContext(user, ctx)
		if a.Bucket != b.Bucket {
			t.Fatalf("user %s: %s before the rename, %s after", user, a.Bucket, b.Bucket)
		}
		if a.Bucket == "on" {
			on++
		}
	}
	if on < 1800 || on > 2200 {
		t.Errorf("%d of 4,000 users on at 50%%", on)
	}
	// The split hashes apart from the feature's ring: its users are not
	// the ring's.
	same := 0
	for i := range 4000 {
		user := fmt.Sprintf("user-%d", i)
		if c.peekContext(user, ctx).Bucket == c.peekContext(user, nil).Bucket {
			same++
		}
	}
	if same > 2300 || same < 1700 {
		t.Errorf("%d of 4,000 users get the same bucket from the split and the ring: not independent", same)
	}
	if n := testing.AllocsPerRun(100, func() { c.serveContext("user-7", ctx) }); n != 0 {
		t.Errorf("a split evaluation allocates %v times, want 0", n)
	}
}

func TestSplitRefused(t *testing.T) {
	cases := []struct {
		name  string
		serve Serve
		field string
	}{
		{"no ring", Serve{Split: map[string]float64{"on": 1}}, "rules[0].serve.split_ring"},
		{"a ring far from the shares", Serve{Split: map[string]float64{"on": 0.5, "off": 0.5}, SplitRing: []SplitBucket{{Name: "on", Replicas: 1}, {Name: "off", Replicas: 1000}}}, "rules[0].serve.split_ring"},
		{"a ring of another bucket", Serve{Split: map[string]float64{"on": 1}, SplitRing: []SplitBucket{{Name: "off", Replicas: 10}}}, "rules[0].serve.split_ring"},
		{"sum", Serve{Split: map[string]float64{"on": 0.5}}, "rules[0].serve.split"},
		{"and the ring", Serve{Ring: true, Split: map[string]float64{"on": 1}}, "rules[0].serve"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := targeted([]Rule{{Name: "r", Serve: tc.serve}}).Validate()
			if e, ok := err.(*Error); !ok || e.Field != tc.field {
				t.Errorf("Validate() = %v, want an error at %s", err, tc.field)
			}
		})
	}
	// A sync form whose split ring was forged is left out by the client.
	f := targeted([]Rule{{Name: "r", Serve: splitServe(2000, 2000)}})
	f.Version = 1
	snap, err := NewSnapshot([]Feature{f}, 1)
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(snap.AppendSync(nil)), `{"name":"on","replicas":2000}`, `{"name":"on","replicas":20}`, 1)
	if _, err := DecodeSync([]byte(doc)); err == nil || !strings.Contains(err.Error(), "split_ring") {
		t.Errorf("DecodeSync of a forged split ring = %v, want it refused", err)
	}
}
