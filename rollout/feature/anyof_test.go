package feature

import (
	"encoding/json"
	"strings"
	"testing"
)

func anyOf(cs ...Condition) Condition { return Condition{Any: cs} }

func folded(c Condition) Condition { c.IgnoreCase = true; return c }

func TestAnyOf(t *testing.T) {
	enterpriseOrStaff := anyOf(cond("plan", OpEq, "enterprise"), cond("email", OpEndsWith, "@example.com"))
	cases := []struct {
		ctx  Context
		want bool
	}{
		{Context{"plan": "enterprise"}, true},
		{Context{"email": "ann@example.com"}, true},
		{Context{"plan": "enterprise", "email": "ann@example.com"}, true},
		{Context{"plan": "free", "email": "ann@elsewhere.org"}, false},
		{Context{}, false},
	}
	cc, err := compileCondition(enterpriseOrStaff, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		if got := cc.holds(tc.ctx, ""); got != tc.want {
			t.Errorf("%s on %v = %v, want %v", describeCondition(enterpriseOrStaff), tc.ctx, got, tc.want)
		}
	}
	// In a rule, any-of is one condition of the rule's "all of".
	f := targeted([]Rule{{Name: "eu-paying", Conditions: []Condition{
		anyOf(cond("plan", OpEq, "enterprise"), cond("plan", OpEq, "pro")),
		cond("country", OpIn, []string{"DE", "FR"}),
	}, Serve: Serve{Bucket: "on"}}})
	c := compile(f)
	for _, tc := range []struct {
		ctx  Context
		rule string
	}{
		{Context{"plan": "pro", "country": "DE"}, "eu-paying"},
		{Context{"plan": "enterprise", "country": "FR"}, "eu-paying"},
		{Context{"plan": "pro", "country": "US"}, ""},
		{Context{"plan": "free", "country": "DE"}, ""},
	} {
		if got := c.peekContext("u1", tc.ctx); got.Rule != tc.rule {
			t.Errorf("peekContext(%v).Rule = %q, want %q", tc.ctx, got.Rule, tc.rule)
		}
	}
	if got, want := DescribeConditions(f.Rules[0].Conditions), `(plan = enterprise or plan = pro) and country is one of [DE,FR]`; got != want {
		t.Errorf("DescribeConditions = %q, want %q", got, want)
	}
}

// targeted is a feature of buckets on and off, half each, with rules.
func targeted(rules []Rule) Feature {
	return Feature{Key: "f", Salt: "s", Enabled: true, Buckets: []Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}, Rules: rules}
}

func TestIgnoreCase(t *testing.T) {
	long := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "ALICE@Example.com"} // a set, past smallList
	ctx := Context{"email": "bob@Example.COM", "city": "ÉCOLE", "groups": []string{"Admins"}, "plan": "Pro", "name": "alice@example.COM"}
	cases := []struct {
		c    Condition
		want bool
	}{
		{folded(cond("email", OpEndsWith, "@example.com")), true},
		{cond("email", OpEndsWith, "@example.com"), false},
		{folded(cond("email", OpStartsWith, "BOB@")), true},
		{folded(cond("email", OpContains, "@EXAMPLE.")), true},
		{folded(cond("email", OpEq, "BOB@example.com")), true},
		{folded(cond("email", OpNeq, "BOB@example.com")), false},
		{folded(cond("plan", OpIn, []string{"pro", "enterprise"})), true},
		{cond("plan", OpIn, []string{"pro", "enterprise"}), false},
		{folded(cond("plan", OpNotIn, []string{"PRO"})), false},
		{folded(cond("name", OpIn, long)), true},
		{folded(cond("groups", OpIn, []string{"admins"})), true},
		{folded(cond("city", OpEq, "école")), true}, // not ASCII: strings.ToLower
		{folded(cond("city", OpStartsWith, "éc")), true},
		{folded(cond("missing", OpNeq, "x")), false}, // absent fails as without ignore_case
	}
	for _, tc := range cases {
		cc, err := compileCondition(tc.c, false)
		if err != nil {
			t.Fatalf("%s: %v", describeCondition(tc.c), err)
		}
		if got := cc.holds(ctx, ""); got != tc.want {
			t.Errorf("%s on %v = %v, want %v", describeCondition(tc.c), ctx[tc.c.Attribute], got, tc.want)
		}
	}
	// ASCII strings are lowered on the stack.
	cc, _ := compileCondition(folded(cond("email", OpEndsWith, "@example.com")), false)
	big, _ := compileCondition(folded(cond("name", OpIn, long)), false)
	if n := testing.AllocsPerRun(100, func() { cc.holds(ctx, ""); big.holds(ctx, "") }); n != 0 {
		t.Errorf("an ignore_case test of an ASCII string allocates %v times, want 0", n)
	}
}

func TestAnyOfAndIgnoreCaseRefused(t *testing.T) {
	rule := func(cs ...Condition) Feature {
		return targeted([]Rule{{Name: "r", Conditions: append([]Condition{cond("plan", OpPresent, nil)}, cs...), Serve: Serve{Bucket: "on"}}})
	}
	many := make([]Condition, MaxConditions+1)
	for i := range many {
		many[i] = cond("plan", OpEq, "x")
	}
	cases := []struct {
		name  string
		f     Feature
		field string
		says  string
	}{
		{"nested any-of", rule(anyOf(cond("plan", OpEq, "a"), anyOf(cond("plan", OpEq, "b")))), "rules[0].conditions[1].any[1].any", "do not nest"},
		{"empty any-of", rule(Condition{Any: []Condition{}}), "rules[0].conditions[1].any", "at least one entry"},
		{"any-of with an op", rule(Condition{Op: OpEq, Any: []Condition{cond("plan", OpEq, "a")}}), "rules[0].conditions[1].any", `holds "any" alone`},
		{"too many entries", rule(anyOf(many...)), "rules[0].conditions[1].any", "at most 20"},
		{"an entry's value", rule(anyOf(cond("plan", OpEq, "a"), cond("seats", OpGt, "many"))), "rules[0].conditions[1].any[1].value", "takes a number"},
		{"ignore_case on a number", rule(folded(cond("seats", OpLt, 3))), "rules[0].conditions[1].ignore_case", "not to lt"},
		{"ignore_case on a bool value", rule(folded(cond("beta", OpEq, true))), "rules[0].conditions[1].ignore_case", "string values"},
		{"ignore_case on matches", rule(folded(cond("email", OpMatches, "^a"))), "rules[0].conditions[1].ignore_case", "not to matches"},
		{"ignore_case in an entry", rule(anyOf(folded(cond("n", OpGte, 1)))), "rules[0].conditions[1].any[0].ignore_case", "not to gte"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.Validate()
			e, ok := err.(*Error)
			if !ok || e.Code != EInvalid {
				t.Fatalf("Validate() = %v, want an EInvalid *Error", err)
			}
			if e.Field != tc.field || !strings.Contains(e.Message, tc.says) {
				t.Errorf("Validate() = field %q, %q; want field %q saying %q", e.Field, e.Message, tc.field, tc.says)
			}
		})
	}
	// A segment holds any-of and ignore_case, not nested.
	seg := Segment{Key: "s", Conditions: []Condition{anyOf(folded(cond("email", OpEndsWith, "@x.io")), cond("plan", OpEq, "pro"))}}
	if err := seg.Validate(); err != nil {
		t.Errorf("Segment.Validate() of an any-of = %v", err)
	}
	seg.Conditions = []Condition{anyOf(anyOf(cond("plan", OpEq, "pro")))}
	if err := seg.Validate(); err == nil || err.(*Error).Field != "conditions[0].any[0].any" {
		t.Errorf("Segment.Validate() of a nested any-of = %v, want conditions[0].any[0].any", err)
	}
}

// An any-of counts its entries among the feature's condition checks, so
// that any-of cannot multiply what one evaluation tests past
// MaxConditionChecks.
func TestAnyOfCountsItsEntries(t *testing.T) {
	entries := make([]Condition, MaxConditions)
	for i := range entries {
		entries[i] = cond("plan", OpEq, "x")
	}
	var rules []Rule
	for i := range MaxConditionChecks/(MaxConditions*MaxConditions) + 1 {
		r := Rule{Name: "r" + strings.Repeat("x", i), Serve: Serve{Bucket: "on"}}
		for range MaxConditions {
			r.Conditions = append(r.Conditions, anyOf(entries...))
		}
		rules = append(rules, r)
	}
	f := targeted(rules)
	err := f.Validate()
	if err == nil || !strings.Contains(err.Error(), "checks") {
		t.Fatalf("Validate() of %d any-of entries = %v, want the checks refused", len(rules)*MaxConditions*MaxConditions, err)
	}
	// Within the limit, an evaluation tests each entry at most once.
	f.Rules = f.Rules[:MaxConditionChecks/(MaxConditions*MaxConditions)]
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	checks := CountConditionChecks(t)
	compile(f).peekContext("u", Context{"plan": "y"})
	if n := checks(); n > MaxConditionChecks {
		t.Errorf("one evaluation tested %d conditions, more than %d", n, MaxConditionChecks)
	}
}

// Any-of and ignore_case travel in the sync form, and the in-app client's
// snapshot answers as the server's.
func TestAnyOfSyncs(t *testing.T) {
	f := targeted([]Rule{{Name: "staff", Conditions: []Condition{anyOf(folded(cond("email", OpEndsWith, "@example.com")), Condition{Op: OpInSegment, Value: json.RawMessage(`"paying"`)})}, Serve: Serve{Bucket: "on"}}})
	f.Version = 1
	paying := CompileSegment(Segment{Key: "paying", Version: 1, Conditions: []Condition{cond("plan", OpEq, "enterprise")}})
	snap := NewSnapshotOf([]*Compiled{Compile(f, map[string]*CompiledSegment{"paying": paying})}, map[string]*CompiledSegment{"paying": paying}, 1)
	buf := snap.AppendSync(nil)
	client, err := DecodeSync(buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, ctx := range []Context{{"email": "Bob@EXAMPLE.com"}, {"plan": "enterprise"}, {"email": "bob@other.org"}} {
		got, _ := client.EvaluateContext("f", "u1", ctx)
		want, _ := snap.EvaluateContext("f", "u1", ctx)
		if got.Rule != want.Rule || got.Bucket != want.Bucket {
			t.Errorf("client %v = %+v, server %+v", ctx, got, want)
		}
	}
	var sf struct {
		Features []SyncFeature `json:"features"`
	}
	json.Unmarshal(buf, &sf)
	if len(sf.Features) != 1 || len(sf.Features[0].Rules) != 1 || !sf.Features[0].Rules[0].Conditions[0].Any[0].IgnoreCase {
		t.Errorf("sync form %s lacks the any-of with ignore_case", buf)
	}
}
