package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// Fine rings (issue #21): planning a change of a 20,000-point feature; the
// memory of 1,000 fine features. Evaluation on a 20,000-point ring beside
// one on a 300-point ring is package feature's bench_fine_test.go.

// fine20000 is a 20,000-point feature: 50/50.
var fine20000 = []feature.Bucket{{Name: "off", Replicas: 10_000}, {Name: "on", Replicas: 10_000}}

func benchPlanFine(b *testing.B, current []feature.Bucket, targets map[string]float64, mode string) {
	b.ReportAllocs()
	var p plan.Plan
	for b.Loop() {
		var err error
		if p, err = plan.ForContext(context.Background(), current, targets, plan.Options{Mode: mode}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(p.Steps), "steps")
	b.ReportMetric(p.MaxError*100, "max-error-points")
	b.ReportMetric(p.Churn*100, "churn-%")
}

func BenchmarkPlanFineNested(b *testing.B) {
	benchPlanFine(b, fine20000, map[string]float64{"off": 0.9, "on": 0.1}, plan.ModeNested)
}

func BenchmarkPlanFineExact(b *testing.B) {
	benchPlanFine(b, fine20000, map[string]float64{"off": 0.9, "on": 0.1}, plan.ModeExact)
}

func BenchmarkPlanFineAuto(b *testing.B) {
	benchPlanFine(b, fine20000, map[string]float64{"off": 0.9, "on": 0.1}, plan.ModeAuto)
}

func BenchmarkPlanFineExactFour(b *testing.B) {
	four := []feature.Bucket{{Name: "A", Replicas: 5000}, {Name: "B", Replicas: 5000}, {Name: "C", Replicas: 5000}, {Name: "D", Replicas: 5000}}
	benchPlanFine(b, four, map[string]float64{"A": 0.4, "B": 0.1, "C": 0.3, "D": 0.2}, plan.ModeExact)
}

// BenchmarkPlanFineChange plans, through plan.ForContext, changes of 2,
// 4 and 6 buckets sharing 20,000 points equally, or 300 (a coarse
// feature's first re-plan), to targets in proportion to n-i for bucket i
// (the first grows, the others shrink), in each mode.
//
//	go test -run '^$' -bench PlanFineChange -benchmem ./rollout
func BenchmarkPlanFineChange(b *testing.B) {
	for _, points := range []int{20_000, 300} {
		for _, n := range []int{2, 4, 6} {
			current := make([]feature.Bucket, n)
			targets := make(map[string]float64, n)
			for i := range current {
				current[i] = feature.Bucket{Name: fmt.Sprintf("v%d", i), Replicas: points / n}
				targets[current[i].Name] = float64(n-i) / float64(n*(n+1)/2)
			}
			for _, mode := range []string{plan.ModeNested, plan.ModeExact, plan.ModeAuto} {
				b.Run(fmt.Sprintf("from=%d/buckets=%d/%s", points, n, mode), func(b *testing.B) {
					benchPlanFine(b, current, targets, mode)
				})
			}
		}
	}
}

func BenchmarkPlanNewFine(b *testing.B) {
	b.ReportAllocs()
	var p plan.Plan
	for b.Loop() {
		var err error
		if p, err = plan.New(map[string]float64{"off": 0.5, "on": 0.5}, plan.Options{Mode: plan.ModeAuto, Order: []string{"off", "on"}}); err != nil {
			b.Fatal(err)
		}
	}
	points := 0
	for _, bk := range p.Buckets {
		points += bk.Replicas
	}
	b.ReportMetric(float64(points), "points")
	b.ReportMetric(p.MaxError*100, "max-error-points")
}

// BenchmarkFineFeaturesMemory compiles 1,000 features planned 50/50 within
// 0.05 points and reports the heap they hold (bytes/feature, MB/1000).
func BenchmarkFineFeaturesMemory(b *testing.B) {
	p, err := plan.New(map[string]float64{"off": 0.5, "on": 0.5}, plan.Options{Mode: plan.ModeAuto, Order: []string{"off", "on"}})
	if err != nil {
		b.Fatal(err)
	}
	const n = 1000
	var held uint64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		all := make([]*feature.Compiled, 0, n)
		for i := range n {
			key := fmt.Sprintf("feature-%04d", i)
			all = append(all, feature.Compile(feature.Feature{Key: key, Enabled: true, Salt: key, Version: 1, Buckets: p.Buckets}, nil))
		}
		snap := feature.NewSnapshotOf(all, nil, 0)
		runtime.GC()
		runtime.ReadMemStats(&after)
		held = after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(snap)
	}
	b.ReportMetric(float64(held)/n, "bytes/feature")
	b.ReportMetric(float64(held)/(1<<20), "MB/1000")
}

// TestFineSyncFormCarriesReplicas: the sync form of a fine feature (50/50
// within 0.05 points, some 4,000 ring points) carries its buckets' replica
// counts, not its points, so it stays a few hundred bytes; a client that
// decodes it evaluates every user as the server does.
func TestFineSyncFormCarriesReplicas(t *testing.T) {
	p, err := plan.New(map[string]float64{"off": 0.5, "on": 0.5}, plan.Options{Mode: plan.ModeAuto, Order: []string{"off", "on"}})
	if err != nil {
		t.Fatal(err)
	}
	points := 0
	for _, b := range p.Buckets {
		points += b.Replicas
	}
	if points < 2000 || !p.WithinTolerance {
		t.Fatalf("the fine plan has %d points, within tolerance %v: want a fine ring", points, p.WithinTolerance)
	}
	snap, err := feature.NewSnapshot([]feature.Feature{{ID: "1", Key: "fine", Enabled: true, Salt: "s", Version: 1, Buckets: p.Buckets}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	form, _ := snap.SyncFeature("fine")
	if len(form) > 256 {
		t.Errorf("the sync form of a feature of %d points is %d bytes, want at most 256:\n%s", points, len(form), form)
	}
	var got feature.SyncFeature
	if err := json.Unmarshal(form, &got); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got.Buckets, p.Buckets, func(a, b feature.Bucket) bool {
		return a.Name == b.Name && a.Replicas == b.Replicas && len(a.Value) == 0
	}) {
		t.Errorf("the sync form carries buckets %v, want the replica counts %v", got.Buckets, p.Buckets)
	}
	client, err := feature.DecodeSync(snap.AppendSync(nil))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10_000 {
		user := fmt.Sprintf("user-%d", i)
		want, _ := snap.Evaluate("fine", user)
		if got, err := client.Evaluate("fine", user); err != nil || got.Bucket != want.Bucket {
			t.Fatalf("the client gives %s %q (%v), the server %q", user, got.Bucket, err, want.Bucket)
		}
	}
}
