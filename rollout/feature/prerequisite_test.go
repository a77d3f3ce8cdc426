package feature

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func prereqFeature(key string, buckets map[string]int, fallback string, prereqs ...Prerequisite) Feature {
	f := Feature{Key: key, ID: "id-" + key, Enabled: true, Salt: key, Version: 1, Fallback: fallback, Prerequisites: prereqs}
	for _, name := range []string{"off", "on", "a", "b"} {
		if n, ok := buckets[name]; ok {
			f.Buckets = append(f.Buckets, Bucket{Name: name, Replicas: n})
		}
	}
	return f
}

func prereqSnapshot(t testing.TB, fs ...Feature) *Snapshot {
	t.Helper()
	all := map[string]*Compiled{}
	for _, f := range fs {
		if err := f.Validate(); err != nil {
			t.Fatal(err)
		}
		all[f.Key] = compile(f)
	}
	return newSnapshot(all, 1)
}

// TestPrerequisiteServesFallback: a user whom the prerequisite serves none
// of the listed buckets gets the dependant's fallback, reason
// prerequisite_failed (OpenFeature's DEFAULT), naming the prerequisite;
// the others get the dependant's own answer. The dependant's evaluations
// are counted, each one, while the prerequisite's are peeks.
func TestPrerequisiteServesFallback(t *testing.T) {
	api := prereqFeature("new-api", map[string]int{"off": 50, "on": 50}, "")
	ui := prereqFeature("new-ui", map[string]int{"off": 0, "on": 100}, "off", Prerequisite{Feature: "new-api", Buckets: []string{"on"}})
	snap := prereqSnapshot(t, api, ui)
	failed, passed := 0, 0
	for i := range 400 {
		user := fmt.Sprintf("u%d", i)
		want, _ := snap.Peek("new-api", user)
		got, err := snap.Evaluate("new-ui", user)
		if err != nil {
			t.Fatal(err)
		}
		if want.Bucket == "on" {
			passed++
			if got.Bucket != "on" || got.Reason != ReasonRing || got.Prerequisite != "" {
				t.Fatalf("%s: new-api serves on, new-ui = %+v, want on by the ring", user, got)
			}
			continue
		}
		failed++
		if got.Bucket != "off" || got.Reason != ReasonPrerequisiteFailed || got.Prerequisite != "new-api" || got.OpenFeatureReason() != "DEFAULT" {
			t.Fatalf("%s: new-api serves %q, new-ui = %+v, want the fallback off, prerequisite_failed naming new-api", user, want.Bucket, got)
		}
	}
	if failed == 0 || passed == 0 {
		t.Fatalf("passed %d, failed %d: want both", passed, failed)
	}
	var total int64
	for _, e := range snap.Compiled("new-ui").Counts(nil) {
		total += e.Count
	}
	if total != 400 {
		t.Errorf("new-ui counted %d evaluations, want 400", total)
	}
	// Its distinct users too, fallbacks included: about 400 users.
	users, _ := usersOf(t, snap.Compiled("new-ui").Counts(nil))
	var distinct int64
	for _, n := range users {
		distinct += n
	}
	if distinct < 380 || distinct > 420 {
		t.Errorf("new-ui counted %d distinct users, want about 400", distinct)
	}
	if n := snap.Compiled("new-api").Counts(nil); len(n) != 0 {
		t.Errorf("new-api counted %v: a prerequisite's test is not an evaluation the app was served", n)
	}
	if !snap.UsesContext("new-ui") || snap.Static("new-ui") {
		t.Error("a feature with prerequisites must read the context and not be static")
	}
}

// TestPrerequisiteChainAndContext: prerequisites see the same user and
// context, through chains; a prerequisite missing from the snapshot, or
// disabled without a fallback, fails.
func TestPrerequisiteChainAndContext(t *testing.T) {
	gate := prereqFeature("gate", map[string]int{"off": 100, "on": 0}, "")
	gate.Rules = []Rule{{Name: "staff", Conditions: []Condition{{Attribute: "email", Op: OpEndsWith, Value: json.RawMessage(`"@example.com"`)}}, Serve: Serve{Bucket: "on"}}}
	mid := prereqFeature("mid", map[string]int{"on": 1}, "", Prerequisite{Feature: "gate", Buckets: []string{"on"}})
	top := prereqFeature("top", map[string]int{"a": 1, "b": 0}, "b", Prerequisite{Feature: "mid", Buckets: []string{"on"}})
	lost := prereqFeature("lost", map[string]int{"a": 1, "b": 0}, "b", Prerequisite{Feature: "gone", Buckets: []string{"on"}})
	snap := prereqSnapshot(t, gate, mid, top, lost)
	staff := Context{"email": "ann@example.com"}
	if e, _ := snap.EvaluateContext("top", "ann", staff); e.Bucket != "a" || e.Reason != ReasonRing {
		t.Errorf("staff: top = %+v, want a", e)
	}
	if e, _ := snap.EvaluateContext("top", "bob", Context{"email": "bob@other.org"}); e.Bucket != "b" || e.Prerequisite != "mid" {
		t.Errorf("not staff: top = %+v, want b for prerequisite mid", e)
	}
	if e, _ := snap.Evaluate("lost", "ann"); e.Reason != ReasonPrerequisiteFailed || e.Prerequisite != "gone" {
		t.Errorf("missing prerequisite: %+v", e)
	}
	gate.Enabled = false
	snap = snap.With("gate", compile(gate))
	if e, _ := snap.EvaluateContext("top", "ann", staff); e.Bucket != "b" {
		t.Errorf("gate disabled without fallback: top = %+v, want b", e)
	}
}

// TestPrerequisiteLoopIsBounded: a snapshot that holds a loop (a store's
// data from before the check, or a client mid-stream) still answers: the
// chain fails past MaxPrerequisiteDepth.
func TestPrerequisiteLoopIsBounded(t *testing.T) {
	x := prereqFeature("x", map[string]int{"on": 1}, "", Prerequisite{Feature: "y", Buckets: []string{"on"}})
	y := prereqFeature("y", map[string]int{"on": 1}, "", Prerequisite{Feature: "x", Buckets: []string{"on"}})
	snap := prereqSnapshot(t, x, y)
	if e, _ := snap.Evaluate("x", "u"); e.Reason != ReasonPrerequisiteFailed {
		t.Errorf("loop: %+v, want prerequisite_failed", e)
	}
}

// TestCheckPrerequisites: loops, chains of 6 links, unknown features and
// buckets, and fan-outs past MaxPrerequisiteEvaluations are refused as
// EPrerequisites; a chain of 5 is fine.
func TestCheckPrerequisites(t *testing.T) {
	all := map[string]Feature{}
	var keys []string
	add := func(f Feature) { all[f.Key] = f; keys = append(keys, f.Key) }
	lookup := func(k string) (Feature, bool) { f, ok := all[k]; return f, ok }
	on := map[string]int{"on": 1, "off": 1}
	for i := range 7 { // c0 ← c1 ← … ← c6: ci requires c(i-1)
		f := prereqFeature(fmt.Sprintf("c%d", i), on, "")
		if i > 0 {
			f.Prerequisites = []Prerequisite{{Feature: fmt.Sprintf("c%d", i-1), Buckets: []string{"on"}}}
		}
		if i < 6 {
			add(f)
		}
	}
	if err := CheckPrerequisites(all["c5"], keys, lookup); err != nil {
		t.Fatalf("a chain of 5 links: %v", err)
	}
	c6 := prereqFeature("c6", on, "", Prerequisite{Feature: "c5", Buckets: []string{"on"}})
	err := CheckPrerequisites(c6, keys, lookup)
	if ErrorCode(err) != EPrerequisites || !strings.Contains(ErrorMessage(err), "6 links") {
		t.Errorf("a chain of 6 links: %v", err)
	}
	// The same chain made from the bottom: c0 requiring a new feature
	// below it lengthens the chain above it.
	add(prereqFeature("under", on, ""))
	c0 := prereqFeature("c0", on, "", Prerequisite{Feature: "under", Buckets: []string{"on"}})
	if err := CheckPrerequisites(c0, keys, lookup); ErrorCode(err) != EPrerequisites || !strings.Contains(ErrorMessage(err), `from "c5"`) {
		t.Errorf("a chain lengthened from below: %v", err)
	}
	loop := prereqFeature("c0", on, "", Prerequisite{Feature: "c3", Buckets: []string{"on"}})
	if err := CheckPrerequisites(loop, keys, lookup); ErrorCode(err) != EPrerequisites || !strings.Contains(ErrorMessage(err), "loop") {
		t.Errorf("a loop: %v", err)
	}
	unknown := prereqFeature("u", on, "", Prerequisite{Feature: "nope", Buckets: []string{"on"}})
	if err := CheckPrerequisites(unknown, keys, lookup); ErrorCode(err) != EPrerequisites || !strings.Contains(ErrorMessage(err), `"nope" does not exist`) {
		t.Errorf("an unknown feature: %v", err)
	}
	bucket := prereqFeature("u", on, "", Prerequisite{Feature: "c1", Buckets: []string{"blue"}})
	if err := CheckPrerequisites(bucket, keys, lookup); ErrorCode(err) != EPrerequisites || !strings.Contains(ErrorMessage(err), `no bucket "blue"`) {
		t.Errorf("an unknown bucket: %v", err)
	}
	// Fan-out: 10 features each requiring 10 leaves; one requiring all 10
	// would test 110 prerequisites.
	var wide []Prerequisite
	for i := range 10 {
		var leaves []Prerequisite
		for j := range 10 {
			leaf := fmt.Sprintf("leaf%d-%d", i, j)
			add(prereqFeature(leaf, on, ""))
			leaves = append(leaves, Prerequisite{Feature: leaf, Buckets: []string{"on"}})
		}
		add(prereqFeature(fmt.Sprintf("mid%d", i), on, "", leaves...))
		wide = append(wide, Prerequisite{Feature: fmt.Sprintf("mid%d", i), Buckets: []string{"on"}})
	}
	if err := CheckPrerequisites(prereqFeature("wide", on, "", wide...), keys, lookup); ErrorCode(err) != EPrerequisites || !strings.Contains(ErrorMessage(err), "would test") {
		t.Errorf("a fan-out of 110: %v", err)
	}
}

// TestValidatePrerequisites: the form of the list is Validate's: at most
// MaxPrerequisites, valid keys, not itself, buckets listed once each.
func TestValidatePrerequisites(t *testing.T) {
	on := map[string]int{"on": 1}
	var many []Prerequisite
	for i := range 1000 {
		many = append(many, Prerequisite{Feature: fmt.Sprintf("p%d", i), Buckets: []string{"on"}})
	}
	for _, c := range []struct {
		name  string
		ps    []Prerequisite
		field string
	}{
		{"1,000", many, "prerequisites"},
		{"self", []Prerequisite{{Feature: "f", Buckets: []string{"on"}}}, "prerequisites[0].feature"},
		{"bad key", []Prerequisite{{Feature: "Bad Key", Buckets: []string{"on"}}}, "prerequisites[0].feature"},
		{"twice", []Prerequisite{{Feature: "p", Buckets: []string{"on"}}, {Feature: "p", Buckets: []string{"off"}}}, "prerequisites[1].feature"},
		{"no bucket", []Prerequisite{{Feature: "p"}}, "prerequisites[0].buckets"},
		{"bucket twice", []Prerequisite{{Feature: "p", Buckets: []string{"on", "on"}}}, "prerequisites[0].buckets[1]"},
	} {
		f := prereqFeature("f", on, "", c.ps...)
		err := f.Validate()
		var e *Error
		if ErrorCode(err) != EInvalid || !asError(err, &e) || e.Field != c.field {
			t.Errorf("%s: %v, want invalid at %s", c.name, err, c.field)
		}
	}
}

func asError(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

// TestPrerequisitesSync: the sync form carries prerequisites, and a
// snapshot decoded from it answers as the server's, bit for bit.
func TestPrerequisitesSync(t *testing.T) {
	api := prereqFeature("new-api", map[string]int{"off": 30, "on": 70}, "")
	ui := prereqFeature("new-ui", map[string]int{"a": 50, "b": 50}, "a", Prerequisite{Feature: "new-api", Buckets: []string{"on"}})
	snap := prereqSnapshot(t, api, ui)
	data, _ := snap.SyncFeature("new-ui")
	if !strings.Contains(string(data), `"prerequisites":[{"feature":"new-api","buckets":["on"]}]`) {
		t.Fatalf("sync form lacks the prerequisites: %s", data)
	}
	client, err := DecodeSync(snap.AppendSync(nil))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		user := fmt.Sprintf("user-%d", i)
		a, _ := snap.Peek("new-ui", user)
		b, _ := client.Peek("new-ui", user)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("%s: server %+v, client %+v", user, a, b)
		}
	}
}

// TestDependantChangeOf: the users whose prerequisite result flips are
// reckoned exactly on a ring-only prerequisite: a ramp of on (which only
// adds replicas to it) flips exactly the share on gains.
func TestDependantChangeOf(t *testing.T) {
	before := compile(prereqFeature("p", map[string]int{"off": 100, "on": 100}, ""))
	afterF := prereqFeature("p", map[string]int{"off": 100, "on": 300}, "")
	afterF.Version = 2
	after := compile(afterF)
	gain := after.Shares()["on"] - before.Shares()["on"]
	d, ok := DependantChangeOf("k", Prerequisite{Feature: "p", Buckets: []string{"on"}}, before, after)
	if !ok || !d.Exact || d.Share == nil || *d.Share < gain-1e-9 || *d.Share > gain+1e-9 || gain < 0.2 {
		t.Fatalf("ramp 50 %% → 75 %%: %+v", d)
	}
	if _, ok := DependantChangeOf("k", Prerequisite{Feature: "p", Buckets: []string{"on"}}, before, before); ok {
		t.Error("no change: reported")
	}
}

// TestExplainReasons: explain says why each condition held or not, in the
// words of issue #32.
func TestExplainReasons(t *testing.T) {
	f := prereqFeature("f", map[string]int{"off": 1, "on": 1}, "")
	f.Rules = []Rule{
		{Name: "new-app", Conditions: []Condition{{Attribute: "app_version", Op: OpSemverGte, Value: json.RawMessage(`"4.2.0"`)}}, Serve: Serve{Bucket: "on"}},
		{Name: "staff", Conditions: []Condition{{Attribute: "email", Op: OpEq, Value: json.RawMessage(`"ann@example.com"`)}}, Serve: Serve{Bucket: "on"}},
		{Name: "paid", Conditions: []Condition{{Attribute: "plan", Op: OpEq, Value: json.RawMessage(`"pro"`)}}, Serve: Serve{Bucket: "on"}},
		{Name: "eu", Conditions: []Condition{{Attribute: "country", Op: OpIn, Value: json.RawMessage(`["DE","FR"]`)}}, Serve: Serve{Bucket: "off"}},
	}
	snap := prereqSnapshot(t, f)
	x, err := snap.Explain("f", "u1", Context{"app_version": 4.3, "email": "Ann@Example.com", "country": "DE"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"app_version: 4.3 is a number, semver_gte needs a string",
		"email: case differs",
		"plan: attribute absent",
		`country: "DE" in [DE, FR]`,
	}
	if len(x.Rules) != 4 {
		t.Fatalf("rules explained: %+v", x.Rules)
	}
	for i, w := range want {
		if got := x.Rules[i].Conditions[0].Why; got != w {
			t.Errorf("rule %d: why = %q, want %q", i, got, w)
		}
	}
	if !x.Rules[3].Matched || x.Reason != ReasonTargetingMatch || *x.Bucket != "off" || x.Ring != nil {
		t.Errorf("explanation: %+v", x)
	}
	if n := snap.Compiled("f").Counts(nil); len(n) != 0 {
		t.Errorf("explain counted %v", n)
	}
}

// TestPrerequisiteFreeEvaluationDoesNotAllocate: features without
// prerequisites cost what they did; with one, evaluation does not
// allocate either.
func TestPrerequisiteFreeEvaluationDoesNotAllocate(t *testing.T) {
	api := prereqFeature("new-api", map[string]int{"off": 50, "on": 50}, "")
	ui := prereqFeature("new-ui", map[string]int{"off": 50, "on": 50}, "off", Prerequisite{Feature: "new-api", Buckets: []string{"on"}})
	snap := prereqSnapshot(t, api, ui)
	for _, key := range []string{"new-api", "new-ui"} {
		if n := testing.AllocsPerRun(200, func() { _, _ = snap.Evaluate(key, "user-12345") }); n != 0 {
			t.Errorf("%s: %v allocations per evaluation", key, n)
		}
	}
}

func BenchmarkEvaluatePrerequisite(b *testing.B) {
	api := prereqFeature("new-api", map[string]int{"off": 50, "on": 50}, "")
	ui := prereqFeature("new-ui", map[string]int{"off": 50, "on": 50}, "off", Prerequisite{Feature: "new-api", Buckets: []string{"on"}})
	snap := prereqSnapshot(b, api, ui)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := snap.Evaluate("new-ui", benchUsers[i%len(benchUsers)]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRenameMovesNoOne: renaming rules, moving them, or both, without
// changing who matches, changes no population (issue #32: a rename
// previewed "6 populations would change bucket"); a changed condition
// still does.
func TestRenameMovesNoOne(t *testing.T) {
	rule := func(name, attr, value, bucket string) Rule {
		return Rule{Name: name, Conditions: []Condition{{Attribute: attr, Op: OpEq, Value: json.RawMessage(strconvQuote(value))}}, Serve: Serve{Bucket: bucket}}
	}
	before := []Rule{rule("staff", "email", "a@x", "on"), rule("pro", "plan", "pro", "on"), rule("de", "country", "DE", "off")}
	renamedAll := []Rule{rule("employees", "email", "a@x", "on"), rule("paying", "plan", "pro", "on"), rule("germany", "country", "DE", "off")}
	movedRenamed := []Rule{rule("paying", "plan", "pro", "on"), rule("staff", "email", "a@x", "on"), rule("germany", "country", "DE", "off")}
	for name, after := range map[string][]Rule{"renamed": renamedAll, "moved and renamed": movedRenamed} {
		if got := RuleChanges(before, after); len(got) != 0 {
			t.Errorf("%s: %d populations: %+v", name, len(got), got)
		}
	}
	changed := []Rule{rule("employees", "email", "b@x", "on"), rule("pro", "plan", "pro", "on"), rule("de", "country", "DE", "off")}
	if got := RuleChanges(before, changed); len(got) == 0 {
		t.Error("a renamed rule whose condition changed: no population")
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }
