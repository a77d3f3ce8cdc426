package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// Fine rings (issue #21): evaluation on a 20,000-point ring beside one on
// a 300-point ring, in the same run (the target: at most 1.1×); planning a
// change of a 20,000-point feature; the memory of 1,000 fine features.

func ringSnapshot(b *testing.B, buckets ...Bucket) *Snapshot {
	b.Helper()
	f := Feature{Key: "f", Enabled: true, Salt: "f", Version: 1, Buckets: buckets}
	if err := f.Validate(); err != nil {
		b.Fatal(err)
	}
	return newSnapshot(map[string]*compiled{"f": compile(f)}, 0)
}

func benchEvaluateRing(b *testing.B, snap *Snapshot) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := snap.Evaluate("f", benchUsers[i%len(benchUsers)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvaluateRing300(b *testing.B) {
	benchEvaluateRing(b, ringSnapshot(b, Bucket{Name: "off", Replicas: 150}, Bucket{Name: "on", Replicas: 150}))
}

func BenchmarkEvaluateRing20000(b *testing.B) {
	benchEvaluateRing(b, ringSnapshot(b, Bucket{Name: "off", Replicas: 10_000}, Bucket{Name: "on", Replicas: 10_000}))
}

// BenchmarkEvaluateRingRatio evaluates on the 300-point and the
// 20,000-point ring in alternating batches of 2,000 users and reports the
// ratio of their fastest batches (ratio-20000/300), and each one's fastest
// batch per evaluation: on a loaded machine, where other work stretches
// whole runs, the fastest of many short batches taken in turns is the
// cost with the least interference, and both sides see the same machine.
//
//	go test -run '^$' -bench EvaluateRingRatio -benchtime 2000x ./rollout
func BenchmarkEvaluateRingRatio(b *testing.B) {
	small := ringSnapshot(b, Bucket{Name: "off", Replicas: 150}, Bucket{Name: "on", Replicas: 150})
	large := ringSnapshot(b, Bucket{Name: "off", Replicas: 10_000}, Bucket{Name: "on", Replicas: 10_000})
	const batch = 2000
	batchTime := func(snap *Snapshot, from int) time.Duration {
		t0 := time.Now()
		for i := range batch {
			if _, err := snap.Evaluate("f", benchUsers[(from+i)%len(benchUsers)]); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	fastest := [2]time.Duration{time.Hour, time.Hour}
	for i := 0; b.Loop(); i++ {
		for side, snap := range [2]*Snapshot{small, large} {
			fastest[side] = min(fastest[side], batchTime(snap, i*batch))
		}
	}
	b.ReportMetric(float64(fastest[0].Nanoseconds())/batch, "ns/eval-300")
	b.ReportMetric(float64(fastest[1].Nanoseconds())/batch, "ns/eval-20000")
	b.ReportMetric(float64(fastest[1])/float64(fastest[0]), "ratio-20000/300")
}

// fine20000 is a 20,000-point feature: 50/50.
var fine20000 = []Bucket{{Name: "off", Replicas: 10_000}, {Name: "on", Replicas: 10_000}}

func benchPlanFine(b *testing.B, current []Bucket, targets map[string]float64, mode string) {
	b.ReportAllocs()
	var p Plan
	for b.Loop() {
		var err error
		if p, err = PlanSharesContext(context.Background(), current, targets, PlanOptions{Mode: mode}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(p.Steps), "steps")
	b.ReportMetric(p.MaxError*100, "max-error-points")
	b.ReportMetric(p.Churn*100, "churn-%")
}

func BenchmarkPlanFineNested(b *testing.B) {
	benchPlanFine(b, fine20000, map[string]float64{"off": 0.9, "on": 0.1}, ModeNested)
}

func BenchmarkPlanFineExact(b *testing.B) {
	benchPlanFine(b, fine20000, map[string]float64{"off": 0.9, "on": 0.1}, ModeExact)
}

func BenchmarkPlanFineAuto(b *testing.B) {
	benchPlanFine(b, fine20000, map[string]float64{"off": 0.9, "on": 0.1}, ModeAuto)
}

func BenchmarkPlanFineExactFour(b *testing.B) {
	four := []Bucket{{Name: "A", Replicas: 5000}, {Name: "B", Replicas: 5000}, {Name: "C", Replicas: 5000}, {Name: "D", Replicas: 5000}}
	benchPlanFine(b, four, map[string]float64{"A": 0.4, "B": 0.1, "C": 0.3, "D": 0.2}, ModeExact)
}

// BenchmarkPlanFineChange plans, through PlanSharesContext, changes of 2,
// 4 and 6 buckets sharing 20,000 points equally, or 300 (a coarse
// feature's first re-plan), to targets in proportion to n-i for bucket i
// (the first grows, the others shrink), in each mode.
//
//	go test -run '^$' -bench PlanFineChange -benchmem ./rollout
func BenchmarkPlanFineChange(b *testing.B) {
	for _, points := range []int{20_000, 300} {
		for _, n := range []int{2, 4, 6} {
			current := make([]Bucket, n)
			targets := make(map[string]float64, n)
			for i := range current {
				current[i] = Bucket{Name: fmt.Sprintf("v%d", i), Replicas: points / n}
				targets[current[i].Name] = float64(n-i) / float64(n*(n+1)/2)
			}
			for _, mode := range []string{ModeNested, ModeExact, ModeAuto} {
				b.Run(fmt.Sprintf("from=%d/buckets=%d/%s", points, n, mode), func(b *testing.B) {
					benchPlanFine(b, current, targets, mode)
				})
			}
		}
	}
}

func BenchmarkPlanNewFine(b *testing.B) {
	b.ReportAllocs()
	var p Plan
	for b.Loop() {
		var err error
		if p, err = PlanNew(map[string]float64{"off": 0.5, "on": 0.5}, PlanOptions{Mode: ModeAuto, Order: []string{"off", "on"}}); err != nil {
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
	p, err := PlanNew(map[string]float64{"off": 0.5, "on": 0.5}, PlanOptions{Mode: ModeAuto, Order: []string{"off", "on"}})
	if err != nil {
		b.Fatal(err)
	}
	const n = 1000
	var held uint64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		all := make(map[string]*compiled, n)
		for i := range n {
			key := fmt.Sprintf("feature-%04d", i)
			all[key] = compile(Feature{Key: key, Enabled: true, Salt: key, Version: 1, Buckets: p.Buckets})
		}
		snap := newSnapshot(all, 0)
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
	p, err := PlanNew(map[string]float64{"off": 0.5, "on": 0.5}, PlanOptions{Mode: ModeAuto, Order: []string{"off", "on"}})
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
	snap, err := NewSnapshot([]Feature{{ID: "1", Key: "fine", Enabled: true, Salt: "s", Version: 1, Buckets: p.Buckets}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	form, _ := snap.SyncFeature("fine")
	if len(form) > 256 {
		t.Errorf("the sync form of a feature of %d points is %d bytes, want at most 256:\n%s", points, len(form), form)
	}
	var got SyncFeature
	if err := json.Unmarshal(form, &got); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got.Buckets, p.Buckets, func(a, b Bucket) bool { return a.Name == b.Name && a.Replicas == b.Replicas && len(a.Value) == 0 }) {
		t.Errorf("the sync form carries buckets %v, want the replica counts %v", got.Buckets, p.Buckets)
	}
	client, err := DecodeSync(snap.AppendSync(nil))
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
