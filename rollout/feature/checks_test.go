package feature

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// checkRules returns n rules of conds conditions each, all holding for a
// context of plan "pro" but the last of each rule, which tests "never".
func checkRules(n int, conds ...Condition) []Rule {
	rules := make([]Rule, n)
	for i := range rules {
		rules[i] = Rule{Name: fmt.Sprintf("r%d", i), Conditions: append(conds[:len(conds):len(conds)], cond("plan", OpEq, "never")), Serve: Serve{Bucket: "on"}}
	}
	return rules
}

// TestConditionChecksLimit: a feature's conditions, a segment's counted at
// every in_segment that uses it, are refused past MaxConditionChecks,
// naming the condition.
func TestConditionChecksLimit(t *testing.T) {
	pro := cond("plan", OpEq, "pro")
	conds := slicesRepeatCond(pro, MaxConditions-1)
	f := targetFeature()
	f.Rules = checkRules(MaxConditionChecks/MaxConditions, conds...)
	if err := f.Validate(); err != nil {
		t.Fatalf("%d conditions: %v", MaxConditionChecks, err)
	}
	f.Rules = checkRules(MaxConditionChecks/MaxConditions+1, conds...)
	want := fmt.Sprintf(`rules[50].conditions[0]: rule "r50": the feature's conditions come to %d checks up to this condition`, MaxConditionChecks+1)
	if err := f.Validate(); err == nil || !strings.HasPrefix(ErrorMessage(err), want) || ErrorCode(err) != EInvalid {
		t.Errorf("Validate of %d conditions = %v, want %q…", len(f.Rules)*MaxConditions, err, want)
	}

	// A segment of 20 conditions counts 20 at each use: 50 uses come to
	// the limit, a 51st passes it.
	seg := Segment{Key: "staff", Conditions: slicesRepeatCond(pro, MaxConditions)}
	segs := map[string]*CompiledSegment{"staff": CompileSegment(seg)}
	in := cond("", OpInSegment, "staff")
	f.Rules = []Rule{{Name: "a", Conditions: slicesRepeatCond(in, MaxConditions), Serve: Serve{Bucket: "on"}},
		{Name: "b", Conditions: slicesRepeatCond(in, MaxConditions), Serve: Serve{Bucket: "on"}},
		{Name: "c", Conditions: slicesRepeatCond(in, MaxConditions), Serve: Serve{Bucket: "on"}}}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	err := Compile(f, segs).CheckPatterns()
	want = `rules[2].conditions[10]: rule "c": the feature's conditions come to 1020 checks up to this condition`
	if err == nil || !strings.HasPrefix(ErrorMessage(err), want) {
		t.Errorf("checkPatterns of 51 uses of a segment of 20 = %v, want %q…", err, want)
	}
}

// TestEvaluationChecksBounded: whatever a configuration stored before the
// limit holds (100 rules of 20 in_segment of segments of 20 conditions,
// 40,000 conditions), one evaluation tests at most MaxConditionChecks; the
// conditions past the limit never hold, those before it still do.
func TestEvaluationChecksBounded(t *testing.T) {
	checked := CountConditionChecks(t)
	pro := cond("plan", OpEq, "pro")
	seg := Segment{Key: "staff", Conditions: slicesRepeatCond(pro, MaxConditions)}
	segs := map[string]*CompiledSegment{"staff": CompileSegment(seg)}
	f := targetFeature()
	in := cond("", OpInSegment, "staff")
	for i := range MaxRules {
		f.Rules = append(f.Rules, Rule{Name: fmt.Sprintf("r%d", i), Conditions: slicesRepeatCond(in, MaxConditions), Serve: Serve{Bucket: "on"}})
	}
	c := Compile(f, segs)
	if err := c.CheckPatterns(); err == nil {
		t.Error("checkPatterns of 40,000 checks passed")
	}
	// Every segment holds but for its last condition: each in_segment
	// tests all 20 and fails, so every rule is tried.
	seg.Conditions[MaxConditions-1] = cond("plan", OpEq, "never")
	segs["staff"] = CompileSegment(seg)
	c = Compile(f, segs)
	e := c.peekContext("u1", Context{"plan": "pro"})
	if n := checked(); n > MaxConditionChecks {
		t.Errorf("one evaluation tested %d conditions, want at most %d", n, MaxConditionChecks)
	}
	if e.Rule != "" {
		t.Errorf("rule served = %q, want none", e.Rule)
	}

	// Within the limit a rule still matches; past it, it never does.
	seg.Conditions[MaxConditions-1] = pro
	segs["staff"] = CompileSegment(seg)
	f.Rules[0].Conditions = append(slicesRepeatCond(cond("plan", OpEq, "never"), 1), f.Rules[0].Conditions[:MaxConditions-1]...)
	if e := Compile(f, segs).peekContext("u1", Context{"plan": "pro"}); e.Rule != "r1" {
		t.Errorf("rule served = %q, want r1 (within the limit)", e.Rule)
	}
	f.Rules = f.Rules[:MaxConditionChecks/MaxConditions/MaxConditions+2]
	for i := range len(f.Rules) - 1 {
		f.Rules[i].Conditions[0] = cond("plan", OpEq, "never")
	}
	if e := Compile(f, segs).peekContext("u1", Context{"plan": "pro"}); e.Rule != "" {
		t.Errorf("rule served = %q, want none (its conditions past the limit never hold)", e.Rule)
	}
}

// TestContextBytes: a context's names, strings and list entries together
// are at most MaxContextBytes, and its lists MaxContextList entries.
func TestContextBytes(t *testing.T) {
	kb := strings.Repeat("x", MaxContextValueLen)
	cases := []struct {
		name string
		ctx  Context
		want string // "" when allowed
	}{
		{"ordinary", Context{"email": "ann@example.com", "plan": "pro", "groups": []string{"admins", "eu"}, "seats": 12.0}, ""},
		{"7 KiB of strings", Context{"a": kb, "b": kb, "c": kb, "d": kb, "e": kb, "f": kb, "g": kb}, ""},
		{"8 strings of 1 KiB", Context{"a": kb, "b": kb, "c": kb, "d": kb, "e": kb, "f": kb, "g": kb, "h": kb}, "the context is more than 8192 bytes"},
		{"a list of 9 KiB", Context{"tags": slicesRepeat(kb, 9)}, "the context is more than 8192 bytes"},
		{"a list too long", Context{"tags": make([]string, MaxContextList+1)}, "is a list of 33; at most 32"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateContext(tc.ctx)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("ValidateContext = %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(ErrorMessage(err), tc.want) || ErrorCode(err) != EInvalid):
				t.Errorf("ValidateContext = %v, want EInvalid saying %q", err, tc.want)
			}
		})
	}
}

func slicesRepeatCond(c Condition, n int) []Condition {
	out := make([]Condition, n)
	for i := range out {
		out[i] = c
	}
	return out
}

// worstFeature returns a feature whose rules come to the limits that bound
// an evaluation (MaxFeaturePatternInsts, MaxConditionChecks) with the
// costliest conditions they allow, the segments they use, and the context
// that costs them most, of MaxContextBytes; as cmd/rollout-bench --attack
// makes them.
func worstFeature(t testing.TB) (Feature, map[string]*CompiledSegment, Context) {
	const entryBytes = MaxListBytes / MaxContextList
	entry := func(i int) string { return strings.Repeat("x", entryBytes-4) + fmt.Sprintf("%04d", i) }
	list := []string{entry(MaxContextList - 1)}
	for i := MaxContextList + 1; ; i++ {
		b, _ := json.Marshal([]Condition{cond("tags", OpIn, append(list, entry(i)))})
		if len(b) > MaxTargetingBytes || len(list) == MaxListValues {
			break
		}
		list = append(list, entry(i))
	}
	seg := Segment{Key: "list", Conditions: []Condition{cond("tags", OpIn, list)}}
	if err := seg.Validate(); err != nil {
		t.Fatal(err)
	}
	segs := map[string]*CompiledSegment{"list": CompileSegment(seg)}
	f := targetFeature()
	never := cond("plan", OpEq, "never")
	checks := 0
	for i := 0; i < 2; i++ {
		f.Rules = append(f.Rules, Rule{Name: fmt.Sprintf("re%d", i), Conditions: []Condition{cond("email", OpMatches, `[a-z]{1,240}[0-9]`), never}, Serve: Serve{Bucket: "on"}})
		checks += 2
	}
	for checks < MaxConditionChecks {
		r := Rule{Name: fmt.Sprintf("list%d", len(f.Rules)), Serve: Serve{Bucket: "on"}}
		for range min(MaxConditions-1, MaxConditionChecks-checks-1) {
			r.Conditions = append(r.Conditions, cond("", OpInSegment, "list"))
		}
		r.Conditions = append(r.Conditions, never)
		checks += len(r.Conditions)
		f.Rules = append(f.Rules, r)
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Compile(f, segs).CheckPatterns(); err != nil {
		t.Fatal(err)
	}
	tags := make([]string, MaxContextList)
	for i := range tags {
		tags[i] = entry(i)
	}
	ctx := Context{"email": strings.Repeat("a", MaxMatchBytes), "plan": "pro", "tags": tags}
	return f, segs, ctx
}

// BenchmarkWorstEvaluation evaluates worstFeature with its context, beside
// a feature of 5 rules of 2 conditions with an ordinary context: the ratio
// bounds what one evaluation can cost.
func BenchmarkWorstEvaluation(b *testing.B) {
	f, segs, ctx := worstFeature(b)
	worst := Compile(f, segs)
	plain := targetFeature()
	for i := range 5 {
		plain.Rules = append(plain.Rules, Rule{Name: fmt.Sprintf("r%d", i), Conditions: []Condition{cond("country", OpIn, []string{"DE", "AT"}), cond("plan", OpEq, "enterprise")}, Serve: Serve{Bucket: "on"}})
	}
	ordinary := compile(plain)
	plainCtx := Context{"email": "ann@example.com", "plan": "pro", "country": "FR", "app": "4.2.0", "beta": true, "seats": 12.0}
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ordinary.peekContext("u1", plainCtx)
		}
	})
	b.Run("worst", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			worst.peekContext("u1", ctx)
		}
	})
}
