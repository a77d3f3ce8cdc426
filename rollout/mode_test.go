package rollout_test

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// TestPlanModes: a feature created by percentages in a mode is fine
// (every share within 0.05 points); ModeAuto answers a two-bucket change
// with the nested plan, which changes one bucket, offers the exact plan
// beside it, and changing back returns the same buckets; a change of
// several buckets at once is answered exactly, its cross-moves listed.
func TestPlanModes(t *testing.T) {
	auto := plan.Options{Mode: plan.ModeAuto, Order: []string{"off", "on"}}
	half := map[string]float64{"off": 0.5, "on": 0.5}
	created, err := plan.New(half, auto)
	if err != nil || !created.WithinTolerance || created.Tolerance != 0.0005 || created.Buckets[0].Name != "off" {
		t.Fatalf("plan.New(50/50, auto) = %+v, %v; want off first, within 0.0005", created, err)
	}
	ten := map[string]float64{"off": 0.9, "on": 0.1}
	p, err := plan.For(created.Buckets, ten, auto)
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != plan.ModeNested || !slices.Equal(p.Varied, []string{"on"}) || p.Buckets[0].Replicas != created.Buckets[0].Replicas || !p.WithinTolerance {
		t.Errorf("plan.For(50 → 10, auto) = mode %q varied %v buckets %v within %v; want nested, only on", p.Mode, p.Varied, p.Buckets, p.WithinTolerance)
	}
	if _, ok := p.Options[plan.ModeNested]; !ok || len(p.Options) != 1 {
		t.Errorf("options %v, want nested alone", p.Options)
	}
	back, err := plan.For(p.Buckets, half, auto)
	if err != nil || !sameBuckets(back.Buckets, created.Buckets) {
		t.Errorf("50 → 10 → 50 = %v, %v; want %v", back.Buckets, err, created.Buckets)
	}

	four := plan.Options{Mode: plan.ModeAuto, Order: []string{"A", "B", "C", "D"}}
	start, err := plan.New(map[string]float64{"A": 0.25, "B": 0.25, "C": 0.25, "D": 0.25}, four)
	if err != nil {
		t.Fatal(err)
	}
	to := map[string]float64{"A": 0.4, "B": 0.1, "C": 0.3, "D": 0.2}
	e, err := plan.For(start.Buckets, to, four)
	if err != nil {
		t.Fatal(err)
	}
	if e.Mode != plan.ModeExact || !e.WithinTolerance || len(e.CrossMoves) == 0 || e.CrossChurn <= 0 || e.Options[plan.ModeNested].Churn <= 0 || e.Options[plan.ModeExact].Churn != e.Churn {
		t.Errorf("plan.For(several, auto) = mode %q within %v cross %v (%v) options %v; want exact, cross-moves listed", e.Mode, e.WithinTolerance, e.CrossMoves, e.CrossChurn, e.Options)
	}
	if _, err := plan.For(start.Buckets, to, plan.Options{Mode: "closest"}); feature.ErrorCode(err) != feature.EInvalid {
		t.Errorf("unknown mode = %v, want EInvalid", err)
	}
}

// TestZeroShares: a feature can be created with on at 0 % (0 replicas,
// valid, serving no one), ramped from it by a nested plan, taken to 100 %
// keeping off at 0 replicas, and back down to where it was.
func TestZeroShares(t *testing.T) {
	svc, _ := newService(t)
	auto := plan.Options{Mode: plan.ModeAuto, Order: []string{"off", "on"}}
	p, err := plan.New(map[string]float64{"off": 1, "on": 0}, auto)
	if err != nil {
		t.Fatal(err)
	}
	f := feature.Feature{Key: "z", Enabled: true, Salt: "z", Buckets: p.Buckets}
	if len(f.Buckets) != 2 || f.Buckets[1].Name != "on" || f.Buckets[1].Replicas != 0 {
		t.Fatalf("plan.New(on 0 %%) = %v, want on with 0 replicas", f.Buckets)
	}
	mustCreate(t, svc, f)
	for _, u := range []string{"a", "b", "c", "d", "e"} {
		if e, _ := svc.Snapshot().Evaluate("z", u); e.Bucket != "off" {
			t.Errorf("Evaluate(z, %s) = %q at 0 %%, want off", u, e.Bucket)
		}
	}
	var rings [][]feature.Bucket
	for _, share := range []float64{0.01, 0.5, 1, 0.5, 0.01, 0} {
		cur, _ := svc.Snapshot().Feature("z")
		p, _, err := svc.Plan("z", map[string]float64{"off": 1 - share, "on": share}, auto)
		if err != nil {
			t.Fatalf("Plan(on %v) = %v", share, err)
		}
		if len(p.Varied) != 1 || len(p.Buckets) != 2 || math.Abs(p.SharesAfter["on"]-share) > plan.FineTolerance {
			t.Errorf("Plan(on %v) = %v varied %v shares %v", share, p.Buckets, p.Varied, p.SharesAfter)
		}
		if _, err := svc.Change(context.Background(), "z", change.SetBuckets(p.Buckets), rollout.ChangeOptions{}); err != nil {
			t.Fatalf("Change(on %v) = %v", share, err)
		}
		rings = append(rings, p.Buckets)
		_ = cur
	}
	if rings[0][1].Replicas == 0 || rings[2][0].Replicas != 0 || !sameBuckets(rings[1], rings[3]) || !sameBuckets(rings[0], rings[4]) || rings[5][1].Replicas != 0 {
		t.Errorf("0 → 1 → 50 → 100 → 50 → 1 → 0 %%: %v; want off kept at 0 replicas at 100 %%, the same rings down as up", rings)
	}
}

func sameBuckets(a, b []feature.Bucket) bool {
	return slices.EqualFunc(a, b, func(x, y feature.Bucket) bool { return x.Name == y.Name && x.Replicas == y.Replicas })
}

// TestZeroSharesSync: a bucket with 0 replicas reaches an in-app client
// through the sync form, which evaluates as the server does, and a fine
// feature's sync form carries replica counts, not points.
func TestZeroSharesSync(t *testing.T) {
	svc, _ := newService(t)
	mustCreate(t, svc, feature.Feature{Key: "z", Enabled: true, Salt: "z", Buckets: []feature.Bucket{{Name: "off", Replicas: 2000}, {Name: "on"}, {Name: "beta", Replicas: 17}}})
	data := svc.Snapshot().AppendSync(nil)
	client, err := feature.DecodeSync(data)
	if err != nil {
		t.Fatalf("DecodeSync = %v", err)
	}
	if !strings.Contains(string(data), `"name":"on","replicas":0`) || len(data) > 1024 {
		t.Errorf("sync form %s, want on with 0 replicas, replica counts only", data)
	}
	for u := range 2000 {
		user := "u" + strconv.Itoa(u)
		want, _ := svc.Snapshot().Peek("z", user)
		got, _ := client.Peek("z", user)
		if got.Bucket != want.Bucket || got.Bucket == "on" {
			t.Fatalf("client Peek(z, %s) = %q, server %q; want equal, never on", user, got.Bucket, want.Bucket)
		}
	}
}

// TestRoundedTargets: in a mode, 3 × 33.33 % is equal thirds (targets
// rescaled to sum to 1); without a mode, and beyond two decimals' rounding,
// targets must sum to 1.
func TestRoundedTargets(t *testing.T) {
	thirds := map[string]float64{"A": 0.3333, "B": 0.3333, "C": 0.3333}
	p, err := plan.New(thirds, plan.Options{Mode: plan.ModeAuto})
	if err != nil || !p.WithinTolerance || p.Targets["A"] != 0.3333/0.9999 {
		t.Fatalf("plan.New(3 × 33.33 %%) = %+v, %v; want thirds within tolerance", p, err)
	}
	for _, name := range []string{"A", "B", "C"} {
		if math.Abs(p.SharesAfter[name]-1.0/3) > plan.FineTolerance {
			t.Errorf("share of %s = %v, want a third within 0.05 points", name, p.SharesAfter[name])
		}
	}
	if _, err := plan.New(thirds, plan.Options{}); feature.ErrorCode(err) != feature.EInvalid {
		t.Errorf("plan.New(3 × 33.33 %%, no mode) = %v, want EInvalid", err)
	}
	if _, err := plan.New(map[string]float64{"A": 0.333, "B": 0.333, "C": 0.333}, plan.Options{Mode: plan.ModeAuto}); feature.ErrorCode(err) != feature.EInvalid {
		t.Errorf("plan.New(3 × 33.3 %%) = %v, want EInvalid", err)
	}
}

// TestZeroTargetKept: a change of several buckets with one target at 0 %
// keeps that bucket with 0 replicas in every mode (issue #21: present,
// serving nobody), through plan.For and Service.Plan, whose plan applies;
// a plan of no mode removes it, as it always did.
func TestZeroTargetKept(t *testing.T) {
	svc, _ := newService(t)
	order := []string{"A", "B", "C"}
	third := 1.0 / 3
	start, err := plan.New(map[string]float64{"A": third, "B": third, "C": third}, plan.Options{Mode: plan.ModeAuto, Order: order})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, svc, feature.Feature{Key: "z", Enabled: true, Salt: "z", Buckets: start.Buckets})
	to := map[string]float64{"A": 0.7, "B": 0.3, "C": 0}
	for _, mode := range []string{plan.ModeNested, plan.ModeExact, plan.ModeAuto} {
		opts := plan.Options{Mode: mode}
		p, err := plan.For(start.Buckets, to, opts)
		if err != nil {
			t.Fatal(err)
		}
		s, _, err := svc.Plan("z", to, opts)
		if err != nil {
			t.Fatalf("Plan(%s) = %v", mode, err)
		}
		for _, q := range []plan.Plan{p, s} {
			names := make([]string, len(q.Buckets))
			for i, b := range q.Buckets {
				names[i] = b.Name
			}
			if !slices.Equal(names, order) || q.Buckets[2].Replicas != 0 || q.SharesAfter["C"] != 0 {
				t.Errorf("mode %s: plan %v shares %v; want A, B, C with C at 0 replicas", mode, q.Buckets, q.SharesAfter)
			}
			for name, o := range q.Options {
				if len(o.Buckets) != 3 || o.Buckets[2].Name != "C" || o.Buckets[2].Replicas != 0 {
					t.Errorf("mode %s: its %s option %v; want C at 0 replicas", mode, name, o.Buckets)
				}
			}
		}
		if mode == plan.ModeExact && !p.WithinTolerance {
			t.Errorf("exact plan max error %v, want within %v", p.MaxError, p.Tolerance)
		}
		if mode == plan.ModeAuto && len(p.Options) != 2 {
			t.Errorf("auto plan options %v, want nested and exact (two buckets change)", p.Options)
		}
	}
	exact, _, _ := svc.Plan("z", to, plan.Options{Mode: plan.ModeExact})
	if _, err := svc.Change(context.Background(), "z", change.SetBuckets(exact.Buckets), rollout.ChangeOptions{}); err != nil {
		t.Fatalf("Change(exact plan) = %v", err)
	}
	if f, _ := svc.Snapshot().Feature("z"); len(f.Buckets) != 3 || f.Buckets[2].Replicas != 0 {
		t.Fatalf("after the exact plan: %v; want C kept at 0 replicas", f.Buckets)
	}
	for u := range 1000 {
		if e, _ := svc.Snapshot().Evaluate("z", "u"+strconv.Itoa(u)); e.Bucket == "C" {
			t.Fatalf("user u%d gets C at 0 %%", u)
		}
	}
	none, err := plan.For(start.Buckets, to, plan.Options{})
	if err != nil || len(none.Buckets) != 2 {
		t.Errorf("plan.For(no mode) = %v, %v; want C removed", none.Buckets, err)
	}
}
