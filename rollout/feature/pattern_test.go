package feature

import (
	"strings"
	"testing"
)

// emailPattern is what an editor writes to match e-mail addresses: 764
// instructions, within MaxPatternInsts.
const emailPattern = `[a-z0-9._%+-]{1,64}@[a-z0-9.-]{1,255}\.[a-z]{2,63}`

func TestPatternLimits(t *testing.T) {
	cases := []struct {
		name, pattern string
		want          string // "" when allowed
	}{
		{"e-mail", emailPattern, ""},
		{"suffix", `@example\.com$`, ""},
		{"count of 256", `^\w{256}$`, ""},
		{"nested within", `^(?:[a-z]{1,8}\.){1,32}$`, ""},
		{"248 bytes of optional words", strings.Repeat(`(?:\w?){1000}`, 19) + "$", "repeats more than 256 times"},
		{"one optional word 1000 times", `(?:\w?){1000}`, "repeats more than 256 times"},
		{"count over", `a{1,300}`, "repeats more than 256 times"},
		{"nested counts multiplied", `(?:a{1,20}){1,20}`, "repeats more than 256 times"},
		{"instructions", `[a-z]{1,250}[0-9]{1,250}[A-Z]{1,250}`, "compiles to 1499 instructions; at most 1000"},
		{"not RE2", `(?:a`, "not a valid RE2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.pattern) > MaxPatternBytes {
				t.Fatalf("pattern of %d bytes, over MaxPatternBytes", len(tc.pattern))
			}
			_, err := compileCondition(cond("email", OpMatches, tc.pattern), false)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("compileCondition(%q) = %v, want no error", tc.pattern, err)
			case tc.want != "" && (err == nil || !strings.Contains(ErrorMessage(err), tc.want)):
				t.Errorf("compileCondition(%q) = %v, want an error saying %q", tc.pattern, err, tc.want)
			case tc.want != "" && ErrorCode(err) != EInvalid:
				t.Errorf("compileCondition(%q) = %v, want EInvalid", tc.pattern, err)
			}
		})
	}
}

func TestPatternTotals(t *testing.T) {
	email := cond("email", OpMatches, emailPattern)
	f := targetFeature()
	f.Rules = []Rule{
		{Name: "staff", Conditions: []Condition{cond("plan", OpEq, "pro"), email}, Serve: Serve{Bucket: "on"}},
		{Name: "again", Conditions: []Condition{cond("plan", OpEq, "free"), email}, Serve: Serve{Bucket: "on"}},
	}
	err := f.Validate()
	if want := `rules[1].conditions[1]: rule "again": the feature's matches patterns`; err == nil || !strings.HasPrefix(ErrorMessage(err), want) {
		t.Errorf("Validate of two e-mail patterns = %v, want %q…", err, want)
	}
	seg := Segment{Key: "staff", Conditions: []Condition{email, cond("email2", OpMatches, emailPattern)}}
	err = seg.Validate()
	if want := `conditions[1]: segment "staff": the segment's matches patterns compile to 1528 instructions`; err == nil || !strings.HasPrefix(ErrorMessage(err), want) {
		t.Errorf("Validate of a segment of two e-mail patterns = %v, want %q…", err, want)
	}

	// A segment counts at every in_segment that uses it: an evaluation
	// may run it at each.
	seg.Conditions = seg.Conditions[:1]
	if err := seg.Validate(); err != nil {
		t.Fatal(err)
	}
	segs := map[string]*CompiledSegment{"staff": CompileSegment(seg)}
	f.Rules = []Rule{
		{Name: "a", Conditions: []Condition{cond("", OpInSegment, "staff")}, Serve: Serve{Bucket: "on"}},
		{Name: "b", Conditions: []Condition{cond("plan", OpEq, "pro"), cond("", OpInSegment, "staff")}, Serve: Serve{Bucket: "off"}},
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	c := Compile(f, segs)
	err = c.CheckPatterns()
	if want := `rules[1].conditions[1]: rule "b": the feature's matches patterns (a segment's counted at each in_segment that uses it) compile to 1528 instructions`; err == nil || !strings.HasPrefix(ErrorMessage(err), want) {
		t.Errorf("checkPatterns of a segment used twice = %v, want %q…", err, want)
	}
	// Compiled all the same (as a feature stored before the limit is),
	// the use past the total never holds, the first one still does.
	ctx := Context{"email": "ann@example.com", "plan": "pro"}
	if e := c.peekContext("u1", ctx); e.Rule != "a" {
		t.Errorf("rule served = %q, want a", e.Rule)
	}
	f.Rules = f.Rules[1:]
	if e := Compile(f, segs).peekContext("u1", ctx); e.Rule != "b" {
		t.Errorf("rule served alone = %q, want b", e.Rule)
	}
}

// TestMatchScansBoundedBytes: however big a context is, a matches
// condition scans at most MaxMatchBytes of an attribute.
func TestMatchScansBoundedBytes(t *testing.T) {
	scanned := CountMatchedBytes(t)
	f := targetFeature()
	f.Rules = []Rule{{Name: "mail", Conditions: []Condition{cond("emails", OpMatches, emailPattern)}, Serve: Serve{Bucket: "on"}}}
	c := compile(f)
	kb := strings.Repeat("abcdefghij", 103)[:MaxContextValueLen]
	list := make([]string, MaxContextBytes/MaxContextValueLen-1)
	for i := range list {
		list[i] = kb
	}
	ctx := Context{"emails": list}
	if err := ValidateContext(ctx); err != nil {
		t.Fatal(err)
	}
	if e := c.peekContext("u1", ctx); e.Rule != "" {
		t.Errorf("rule served = %q, want none", e.Rule)
	}
	if n := scanned(); n > MaxMatchBytes {
		t.Errorf("a list of %d × %d bytes: patterns scanned %d bytes, want at most %d", len(list), len(kb), n, MaxMatchBytes)
	}
	before := scanned()
	c.peekContext("u1", Context{"emails": kb})
	if n := scanned() - before; n != 0 {
		t.Errorf("a string of %d bytes: patterns scanned %d bytes, want 0 (longer than %d: no match)", len(kb), n, MaxMatchBytes)
	}
	// The entries within the first MaxMatchBytes bytes are tried.
	short := []string{"not an address", "ann@example.com"}
	if e := c.peekContext("u1", Context{"emails": short}); e.Rule != "mail" {
		t.Errorf("rule served for %q = %q, want mail", short, e.Rule)
	}
	late := append(slicesRepeat("x", MaxMatchBytes), "ann@example.com")
	if e := c.peekContext("u1", Context{"emails": late}); e.Rule != "" {
		t.Errorf("rule served for an address after %d bytes = %q, want none", MaxMatchBytes, e.Rule)
	}
}

// TestListBytesNegation: a list is read up to MaxListBytes; neq and not_in
// hold only when every entry was read.
func TestListBytesNegation(t *testing.T) {
	long := append(slicesRepeat(strings.Repeat("g", 64), MaxListBytes/64), "blocked")
	short := []string{"eu", "blocked"}
	cases := []struct {
		c      Condition
		groups []string
		want   bool
	}{
		{cond("groups", OpIn, []string{"blocked"}), short, true},
		{cond("groups", OpNotIn, []string{"blocked"}), short, false},
		{cond("groups", OpNotIn, []string{"other"}), short, true},
		{cond("groups", OpIn, []string{"blocked"}), long, false},
		{cond("groups", OpNotIn, []string{"blocked"}), long, false}, // not all read: fails closed
		{cond("groups", OpNotIn, []string{"other"}), long, false},
		{cond("groups", OpNeq, "blocked"), long, false},
		{cond("groups", OpContains, "lock"), long, false},
	}
	for _, tc := range cases {
		cc, err := compileCondition(tc.c, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := cc.holds(Context{"groups": tc.groups}, ""); got != tc.want {
			t.Errorf("%s %s with %d entries = %v, want %v", tc.c.Op, tc.c.Value, len(tc.groups), got, tc.want)
		}
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// BenchmarkMatchWorstContext evaluates a feature whose patterns come to
// MaxFeaturePatternInsts against the context that costs them most, beside
// the same feature against an ordinary context: the ratio is what the
// worst context costs.
func BenchmarkMatchWorstContext(b *testing.B) {
	f := targetFeature()
	pattern := `[a-z]{1,240}[0-9]`
	n := 0
	for i := 0; ; i++ {
		cc, err := compileCondition(cond("email", OpMatches, pattern), false)
		if err != nil {
			b.Fatal(err)
		}
		if n+cc.insts > MaxFeaturePatternInsts {
			break
		}
		n += cc.insts
		f.Rules = append(f.Rules, Rule{Name: "r" + string(rune('a'+i)), Conditions: []Condition{cond("email", OpMatches, pattern)}, Serve: Serve{Bucket: "on"}})
	}
	if err := f.Validate(); err != nil {
		b.Fatal(err)
	}
	c := compile(f)
	worst := Context{"email": strings.Repeat("a", MaxMatchBytes)}
	plain := Context{"email": "ann@example.com"}
	b.Logf("%d rules, %d instructions", len(f.Rules), n)
	for _, bc := range []struct {
		name string
		ctx  Context
	}{{"plain", plain}, {"worst", worst}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.peekContext("u1", bc.ctx)
			}
		})
	}
}
