package feature

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// combinedSnapshot is issue #32's costliest feature: a rule of an any-of
// (plan is enterprise, or the e-mail ends with @example.com, case
// ignored) serving a 50/50 split, then a rule of a 100,000-user list,
// then the ring; with contexts that reach each of them.
func combinedSnapshot(tb testing.TB) (*Snapshot, []Context) {
	tb.Helper()
	listed := make([]string, MaxListUsers)
	for i := range listed {
		listed[i] = fmt.Sprintf("listed-%d", i)
	}
	anyOf := Condition{Any: []Condition{cond("plan", OpEq, "enterprise"), {Attribute: "email", Op: OpEndsWith, Value: json.RawMessage(`"@example.com"`), IgnoreCase: true}}}
	f := Feature{Key: "gate", Enabled: true, Salt: "gate", Version: 1,
		Buckets: []Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}},
		Rules: []Rule{
			{Name: "enterprise", Conditions: []Condition{anyOf}, Serve: splitServe(2000, 2000)},
			{Name: "beta", Conditions: []Condition{{Op: OpInSegment, Value: json.RawMessage(`"beta"`)}}, Serve: Serve{Bucket: "on"}},
		}}
	if err := f.Validate(); err != nil {
		tb.Fatal(err)
	}
	seg := Segment{Key: "beta", List: true, Size: len(listed), Version: 1}
	segs := map[string]*CompiledSegment{"beta": CompileUserList(seg, NewUserList("beta", listed))}
	ctxs := []Context{
		{"plan": "enterprise", "email": "ann@corp.io"},
		{"plan": "free", "email": "Bob@Example.COM"},
		{"plan": "free", "email": "carol@corp.io"},
		{"plan": "team"},
	}
	return NewSnapshotOf([]*Compiled{Compile(f, segs)}, segs, 1), ctxs
}

// TestCombinedTargetingAllocatesNothing: the costliest feature of issue
// #32 (split rule, any-of, 100,000-user list) evaluates without
// allocating, and each of its paths is taken.
func TestCombinedTargetingAllocatesNothing(t *testing.T) {
	snap, ctxs := combinedSnapshot(t)
	reasons := map[string]int{}
	for i := range 400 {
		user := benchUsers[i%len(benchUsers)]
		if i%4 == 3 {
			user = fmt.Sprintf("listed-%d", i)
		}
		e, err := snap.EvaluateContext("gate", user, ctxs[i%len(ctxs)])
		if err != nil {
			t.Fatal(err)
		}
		reasons[e.Reason]++
	}
	if reasons[ReasonSplit] == 0 || reasons[ReasonTargetingMatch] == 0 || reasons[ReasonRing] == 0 {
		t.Fatalf("reasons %v: want the split, the list's rule and the ring each taken", reasons)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		snap.EvaluateContext("gate", benchUsers[i%len(benchUsers)], ctxs[i%len(ctxs)])
		i++
	})
	if allocs != 0 {
		t.Errorf("an evaluation allocates %.1f times, want 0", allocs)
	}
}

// BenchmarkCombinedRatio measures, in one run, the costliest feature of
// issue #32 against a plain ring evaluation (BenchmarkEvaluateOne's),
// alternating batches of each so both see the same load, and reports
// their ratio as targeted/plain. The target is at most 2.
func BenchmarkCombinedRatio(b *testing.B) {
	plain := benchSnapshot(b, 1)
	snap, ctxs := combinedSnapshot(b)
	users := make([]string, 1024)
	for i := range users {
		users[i] = benchUsers[i%len(benchUsers)]
		if i%4 == 3 {
			users[i] = fmt.Sprintf("listed-%d", i*97)
		}
	}
	const batch = 256
	var tPlain, tTargeted time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		for j := range batch {
			plain.Evaluate("feature-00", benchUsers[(i*batch+j)%len(benchUsers)])
		}
		mid := time.Now()
		for j := range batch {
			k := (i*batch + j) % len(users)
			snap.EvaluateContext("gate", users[k], ctxs[k%len(ctxs)])
		}
		tPlain += mid.Sub(start)
		tTargeted += time.Since(mid)
	}
	b.ReportMetric(float64(tTargeted)/float64(tPlain), "targeted/plain")
	b.ReportMetric(float64(tPlain)/float64(b.N*batch), "plain-ns/eval")
	b.ReportMetric(float64(tTargeted)/float64(b.N*batch), "targeted-ns/eval")
}
