package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/api/clienttest/internal/testserver"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// Targeting in the in-app client: EvaluateContext against the server's
// evaluation paths, and its cost.

func condition(attr, op string, value any) feature.Condition {
	c := feature.Condition{Attribute: attr, Op: op}
	if value != nil {
		c.Value, _ = json.Marshal(value)
	}
	return c
}

// ruledFeature has 5 rules of 2 conditions each, over 6 attributes, and a
// ring of 3 buckets: the feature of the speed target.
func ruledFeature(key string) feature.Feature {
	f := feature.Feature{Key: key, Enabled: true, Salt: key, Buckets: []feature.Bucket{
		{Name: "A", Replicas: 100, Value: raw(`"a"`)}, {Name: "B", Replicas: 100, Value: raw(`"b"`)}, {Name: "on", Replicas: 100, Value: raw(`true`)},
	}}
	f.Rules = []feature.Rule{
		{Name: "staff", Conditions: []feature.Condition{condition("email", feature.OpEndsWith, "@example.com"), condition("beta", feature.OpEq, true)}, Serve: feature.Serve{Bucket: "on"}},
		{Name: "enterprise-de", Conditions: []feature.Condition{condition("plan", feature.OpEq, "enterprise"), condition("country", feature.OpIn, []string{"DE", "AT"})}, Serve: feature.Serve{Bucket: "on"}},
		{Name: "new-app", Conditions: []feature.Condition{condition("version", feature.OpSemverGte, "4.2.0"), condition("country", feature.OpNotIn, []string{"FR"})}, Serve: feature.Serve{Ring: true}},
		{Name: "adults", Conditions: []feature.Condition{condition("age", feature.OpGte, 18), condition("plan", feature.OpNeq, "free")}, Serve: feature.Serve{Bucket: "B"}},
		{Name: "orgs", Conditions: []feature.Condition{condition("org", feature.OpStartsWith, "acme-"), condition("email", feature.OpPresent, nil)}, Serve: feature.Serve{Ring: true, BucketBy: "org"}},
	}
	return f
}

// benchContext has 6 attributes and matches none of ruledFeature's rules:
// every rule is tried, the costliest path.
var benchContext = feature.Context{
	"email": "someone@elsewhere.org", "beta": false, "plan": "pro", "country": "FR", "version": "4.1.9", "age": 17.0,
}

func targetingServer(t testing.TB) *testserver.Server {
	t.Helper()
	s := testserver.Start(t)
	s.Create(t, feature.Feature{Key: "plain", Enabled: true, Salt: "plain", Buckets: []feature.Bucket{
		{Name: "A", Replicas: 100, Value: raw(`"a"`)}, {Name: "B", Replicas: 100, Value: raw(`"b"`)}, {Name: "on", Replicas: 100, Value: raw(`true`)},
	}})
	s.Create(t, ruledFeature("ruled"))
	return s
}

// rulesReachClient skips t while the sync form does not carry rules: the
// client would evaluate the ring alone.
func rulesReachClient(t testing.TB, c *client.Client, key string) {
	t.Helper()
	if f, _ := c.Snapshot().Feature(key); len(f.Rules) == 0 {
		t.Skip("the sync form does not carry rules yet: the in-app client cannot evaluate them")
	}
}

func benchTargetingClient(b *testing.B) *client.Client {
	s := targetingServer(b)
	c, err := client.New(b.Context(), client.Config{URL: s.URL})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkEvaluatePlain: Evaluate of a feature of 3 buckets without rules.
func BenchmarkEvaluatePlain(b *testing.B) {
	c := benchTargetingClient(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sink, _ = c.Evaluate("plain", benchUsers[i&1023])
		i++
	}
}

// BenchmarkEvaluateContextPlain: EvaluateContext of the same feature with
// a context of 6 attributes, which it ignores.
func BenchmarkEvaluateContextPlain(b *testing.B) {
	c := benchTargetingClient(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sink, _ = c.EvaluateContext("plain", benchUsers[i&1023], benchContext)
		i++
	}
}

// BenchmarkEvaluateContextRuled: EvaluateContext of a feature of 5 rules ×
// 2 conditions with a context of 6 attributes that no rule matches (every
// rule tried, then the ring): the speed target.
func BenchmarkEvaluateContextRuled(b *testing.B) {
	c := benchTargetingClient(b)
	rulesReachClient(b, c, "ruled")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sink, _ = c.EvaluateContext("ruled", benchUsers[i&1023], benchContext)
		i++
	}
}

// TestEvaluateContextCost: EvaluateContext does not allocate, with rules or
// without, matched or not; its cost beside Evaluate of a feature without
// rules is reported (the aim is at most 2×), never asserted.
func TestEvaluateContextCost(t *testing.T) {
	s := targetingServer(t)
	c := newClient(t, client.Config{URL: s.URL})
	rulesReachClient(t, c, "ruled")
	staff := feature.Context{"email": "a@example.com", "beta": true, "plan": "pro", "country": "DE", "version": "4.2.1", "age": 30.0}
	for name, eval := range map[string]func(){
		"plain":            func() { sink, _ = c.EvaluateContext("plain", benchUsers[3], benchContext) },
		"ruled, no match":  func() { sink, _ = c.EvaluateContext("ruled", benchUsers[3], benchContext) },
		"ruled, first":     func() { sink, _ = c.EvaluateContext("ruled", benchUsers[3], staff) },
		"ruled, no attrs":  func() { sink, _ = c.EvaluateContext("ruled", benchUsers[3], nil) },
		"ruled, a map":     func() { sink, _ = c.EvaluateContext("ruled", benchUsers[3], map[string]any(benchContext)) },
		"ruled, ring rule": func() { sink, _ = c.EvaluateContext("ruled", benchUsers[3], feature.Context{"version": "5.0.0"}) },
	} {
		if n := testing.AllocsPerRun(1000, eval); n != 0 {
			t.Errorf("EvaluateContext (%s) allocates %v times, want 0", name, n)
		}
	}
	if e, err := c.EvaluateContext("ruled", "u1", staff); err != nil || e.Reason != feature.ReasonTargetingMatch || e.Rule != "staff" || e.Bucket != "on" {
		t.Errorf("ruled for staff = %+v, %v; want on by the rule staff", e, err)
	}
	if testing.Short() || raceEnabled {
		return
	}
	plain := testing.Benchmark(BenchmarkEvaluatePlain)
	ruled := testing.Benchmark(BenchmarkEvaluateContextRuled)
	t.Logf("EvaluateContext of 5 rules × 2 conditions, 6 attributes: %d ns/op, %d allocs/op; Evaluate without rules: %d ns/op: %.2f×",
		ruled.NsPerOp(), ruled.AllocsPerOp(), plain.NsPerOp(), float64(ruled.NsPerOp())/float64(plain.NsPerOp()))
}

// randomFeature is a feature of random buckets, rules, bucket_by and
// overrides over the attributes randomContext draws from.
func randomFeature(r *rand.Rand, key string) feature.Feature {
	f := feature.Feature{Key: key, Enabled: r.IntN(10) > 0, Salt: key}
	names := []string{"A", "B", "C"}
	for i, n := range names {
		f.Buckets = append(f.Buckets, feature.Bucket{Name: n, Replicas: r.IntN(3) * 50, Value: raw(strconv.Quote(strings.ToLower(n)))})
		if i == 0 && f.Buckets[0].Replicas == 0 && r.IntN(2) == 0 {
			f.Buckets[0].Replicas = 100
		}
	}
	if f.Buckets[0].Replicas+f.Buckets[1].Replicas+f.Buckets[2].Replicas == 0 {
		f.Buckets[r.IntN(3)].Replicas = 100
	}
	if !f.Enabled && r.IntN(2) == 0 {
		f.Fallback = names[r.IntN(3)]
	}
	if r.IntN(4) == 0 {
		f.BucketBy = "org"
	}
	if r.IntN(5) == 0 {
		f.Overrides = map[string]string{"u1": names[r.IntN(3)], "u7": names[r.IntN(3)]}
	}
	conds := []func() feature.Condition{
		func() feature.Condition { return condition("plan", feature.OpEq, pick(r, plans)) },
		func() feature.Condition { return condition("plan", feature.OpNeq, pick(r, plans)) },
		func() feature.Condition {
			return condition("country", feature.OpIn, []string{pick(r, countries), pick(r, countries)})
		},
		func() feature.Condition { return condition("country", feature.OpNotIn, []string{pick(r, countries)}) },
		func() feature.Condition { return condition("email", feature.OpEndsWith, "@example.com") },
		func() feature.Condition { return condition("email", feature.OpStartsWith, "vip") },
		func() feature.Condition { return condition("email", feature.OpContains, "x") },
		func() feature.Condition { return condition("email", feature.OpMatches, `^[a-m]`) },
		func() feature.Condition {
			return condition("age", pick(r, []string{feature.OpLt, feature.OpLte, feature.OpGt, feature.OpGte}), r.IntN(60))
		},
		func() feature.Condition {
			return condition("version", pick(r, []string{feature.OpSemverLt, feature.OpSemverLte, feature.OpSemverEq, feature.OpSemverGte, feature.OpSemverGt}), pick(r, versions))
		},
		func() feature.Condition { return condition("beta", feature.OpEq, r.IntN(2) == 0) },
		func() feature.Condition { return condition("groups", feature.OpContains, pick(r, groups)) },
		func() feature.Condition {
			return condition("seen", pick(r, []string{feature.OpBefore, feature.OpAfter}), "2026-06-01T00:00:00Z")
		},
		func() feature.Condition {
			return feature.Condition{Op: feature.OpInSegment, Value: raw(strconv.Quote(pick(r, segmentKeys)))}
		},
		func() feature.Condition { return condition(pick(r, attributes), feature.OpPresent, nil) },
		func() feature.Condition { return condition(pick(r, attributes), feature.OpAbsent, nil) },
	}
	// ignore_case on the string operators that take it, and any-of of
	// the conditions above (issue #32).
	folding := []func() feature.Condition{
		func() feature.Condition { return condition("email", feature.OpEndsWith, "@EXAMPLE.com") },
		func() feature.Condition { return condition("email", feature.OpStartsWith, "Vip") },
		func() feature.Condition { return condition("email", feature.OpContains, "X") },
		func() feature.Condition { return condition("plan", feature.OpEq, "PRO") },
		func() feature.Condition { return condition("plan", feature.OpNeq, "Free") },
		func() feature.Condition { return condition("country", feature.OpIn, []string{"de", "At"}) },
		func() feature.Condition { return condition("country", feature.OpNotIn, []string{"us"}) },
		func() feature.Condition { return condition("groups", feature.OpIn, []string{"ADMINS"}) },
	}
	plain := conds
	conds = append(conds, func() feature.Condition {
		c := folding[r.IntN(len(folding))]()
		c.IgnoreCase = r.IntN(4) > 0
		return c
	}, func() feature.Condition {
		c := feature.Condition{}
		for range 1 + r.IntN(3) {
			c.Any = append(c.Any, plain[r.IntN(len(plain))]())
		}
		return c
	})
	for i := range r.IntN(6) {
		rule := feature.Rule{Name: fmt.Sprintf("r%d", i)}
		for range 1 + r.IntN(2) {
			rule.Conditions = append(rule.Conditions, conds[r.IntN(len(conds))]())
		}
		switch r.IntN(5) {
		case 3:
			// A split of the rule's population (issue #32), by the user or
			// an attribute.
			share := float64(r.IntN(11)) / 10
			rule.Serve = feature.Serve{Split: map[string]float64{"A": share, "C": 1 - share}}
			if r.IntN(2) == 0 {
				rule.Serve.BucketBy = pick(r, []string{"org", "email"})
			}
		case 0:
			rule.Serve = feature.Serve{Ring: true}
		case 1:
			rule.Serve = feature.Serve{Ring: true, BucketBy: pick(r, []string{"org", "email", "age"})}
		default:
			rule.Serve = feature.Serve{Bucket: names[r.IntN(3)]}
		}
		f.Rules = append(f.Rules, rule)
	}
	return f
}

var (
	segmentKeys = []string{"staff", "paying"}
	plans       = []string{"free", "pro", "enterprise"}
	countries   = []string{"DE", "AT", "FR", "US"}
	versions    = []string{"4.1.9", "4.2.0", "4.10.0", "5.0.0-beta.1"}
	groups      = []string{"admins", "beta", "staff"}
	emails      = []string{"vip@example.com", "ann@example.com", "zed@elsewhere.org", "max@x.io", "VIP@Example.COM", "Max@X.io"}
	attributes  = []string{"plan", "country", "email", "age", "version", "beta", "groups", "org", "seen"}
)

func pick[T any](r *rand.Rand, from []T) T { return from[r.IntN(len(from))] }

// randomContext draws each attribute or leaves it out.
func randomContext(r *rand.Rand) feature.Context {
	ctx := feature.Context{}
	maybe := func(name string, v func() any) {
		if r.IntN(3) > 0 {
			ctx[name] = v()
		}
	}
	maybe("plan", func() any { return pick(r, append(plans, "PRO", "Free")) })
	maybe("country", func() any { return pick(r, countries) })
	maybe("email", func() any { return pick(r, emails) })
	maybe("age", func() any { return float64(r.IntN(80)) })
	maybe("version", func() any { return pick(r, versions) })
	maybe("beta", func() any { return r.IntN(2) == 0 })
	maybe("groups", func() any { return []string{pick(r, groups), pick(r, groups)} })
	maybe("org", func() any { return fmt.Sprintf("acme-%d", r.IntN(20)) })
	maybe("seen", func() any { return pick(r, []string{"2026-01-15T10:00:00Z", "2026-11-30T23:59:59+01:00"}) })
	return ctx
}

// queryForm is ctx as GET /evaluate's ctx. parameters carry it: every
// value a string (numbers in their shortest form), a list as the
// parameter repeated.
func queryForm(ctx feature.Context) (url.Values, feature.Context) {
	q, as := url.Values{}, feature.Context{}
	for k, v := range ctx {
		switch x := v.(type) {
		case []string:
			for _, s := range x {
				q.Add("ctx."+k, s)
			}
			as[k] = x
			if len(x) == 1 {
				as[k] = x[0]
			}
		case float64:
			s := strconv.FormatFloat(x, 'g', -1, 64)
			q.Set("ctx."+k, s)
			as[k] = s
		default:
			s := fmt.Sprint(x)
			q.Set("ctx."+k, s)
			as[k] = s
		}
	}
	return q, as
}

// wire is an evaluation as the server's /evaluate answers it.
type wire struct {
	Bucket  *string         `json:"bucket"`
	Value   json.RawMessage `json:"value"`
	Version int             `json:"version"`
	Reason  string          `json:"reason"`
	Rule    string          `json:"rule"`
}

func (w wire) String() string {
	b := "null"
	if w.Bucket != nil {
		b = *w.Bucket
	}
	return fmt.Sprintf("{%s %s v%d %s %s}", b, w.Value, w.Version, w.Reason, w.Rule)
}

func wireOf(e feature.Evaluation) wire {
	w := wire{Version: e.Version, Reason: e.Reason, Rule: e.Rule, Value: raw("null")}
	if e.Bucket != "" {
		w.Bucket, w.Value = &e.Bucket, e.Value
	}
	return w
}

func sameWire(a, b wire) bool {
	var ca, cb bytes.Buffer
	json.Compact(&ca, a.Value)
	json.Compact(&cb, b.Value)
	return (a.Bucket == nil) == (b.Bucket == nil) && (a.Bucket == nil || *a.Bucket == *b.Bucket) &&
		bytes.Equal(ca.Bytes(), cb.Bytes()) && a.Version == b.Version && a.Reason == b.Reason && a.Rule == b.Rule
}

func postJSON(t *testing.T, u string, body any) []byte {
	t.Helper()
	data, _ := json.Marshal(body)
	res, err := http.Post(u, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("POST %s %s = %d %s", u, data, res.StatusCode, out)
	}
	return out
}

// TestContextAgreement: over random features (rules of every operator,
// in_segment among them, rules serving a bucket or the ring by the user or
// an attribute, bucket_by, overrides, the kill switch) and random
// contexts, before and after a segment's change, the in-app
// client answers what the server answers, bit for bit, on each path: POST
// /evaluate with a context, GET /evaluate with ctx. parameters (whose
// values are strings) and OFREP.
func TestContextAgreement(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	s := testserver.Start(t)
	nFeatures, nContexts := 30, 100
	if testing.Short() {
		nFeatures, nContexts = 10, 30
	}
	bg := context.Background()
	for _, seg := range []feature.Segment{
		{Key: "staff", Conditions: []feature.Condition{condition("email", feature.OpEndsWith, "@example.com")}},
		{Key: "paying", Conditions: []feature.Condition{condition("plan", feature.OpIn, []string{"pro", "enterprise"}), condition("beta", feature.OpNeq, true)}},
	} {
		if _, err := s.Svc.CreateSegment(bg, seg, rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	ruled := ""
	for i := range nFeatures {
		f := randomFeature(r, fmt.Sprintf("f%02d", i))
		s.Create(t, f)
		keys = append(keys, f.Key)
		if len(f.Rules) > 0 {
			ruled = f.Key
		}
	}
	c := newClient(t, client.Config{URL: s.URL})
	rulesReachClient(t, c, ruled)
	mismatches := 0
	report := func(format string, args ...any) {
		if mismatches++; mismatches <= 20 {
			t.Errorf(format, args...)
		}
	}
	round := func() {
		for i := range nContexts {
			ctx := randomContext(r)
			user := fmt.Sprintf("u%d", r.IntN(10))
			if i%10 == 9 {
				user = "u7" // overridden in some features
			}
			// POST /evaluate: every feature for this user and context.
			var many struct {
				Results map[string]wire `json:"results"`
			}
			if err := json.Unmarshal(postJSON(t, s.URL+"/evaluate", map[string]any{"user": user, "context": ctx}), &many); err != nil {
				t.Fatal(err)
			}
			q, qctx := queryForm(ctx)
			for _, key := range keys {
				e, err := c.EvaluateContext(key, user, ctx)
				if err != nil {
					t.Fatalf("EvaluateContext(%s, %s, %v): %v", key, user, ctx, err)
				}
				if got := many.Results[key]; !sameWire(got, wireOf(e)) {
					report("POST /evaluate %s for %s %v = %v; the client %v", key, user, ctx, got, wireOf(e))
				}
				// GET /evaluate with ctx. parameters: strings.
				q.Set("feature", key)
				q.Set("user", user)
				res, err := http.Get(s.URL + "/evaluate?" + q.Encode())
				if err != nil {
					t.Fatal(err)
				}
				var one wire
				json.NewDecoder(res.Body).Decode(&one)
				res.Body.Close()
				qe, _ := c.EvaluateContext(key, user, qctx)
				if !sameWire(one, wireOf(qe)) {
					report("GET /evaluate %s for %s ?%s = %v; the client %v", key, user, q.Encode(), one, wireOf(qe))
				}
				// OFREP, with the context's attributes beside the targeting key.
				body := map[string]any{"targetingKey": user}
				for k, v := range ctx {
					body[k] = v
				}
				var of struct {
					Value    json.RawMessage `json:"value"`
					Variant  string          `json:"variant"`
					Reason   string          `json:"reason"`
					Metadata struct {
						Version int    `json:"version"`
						Rule    string `json:"rule"`
					} `json:"metadata"`
				}
				if err := json.Unmarshal(postJSON(t, s.URL+"/ofrep/v1/evaluate/flags/"+key, map[string]any{"context": body}), &of); err != nil {
					t.Fatal(err)
				}
				want := wireOf(e)
				got := wire{Value: of.Value, Version: of.Metadata.Version, Reason: e.Reason, Rule: of.Metadata.Rule}
				if of.Variant != "" {
					got.Bucket = &of.Variant
				} else {
					got.Value = raw("null")
				}
				if !sameWire(got, want) || of.Reason != e.OpenFeatureReason() {
					report("OFREP %s for %s %v = %+v; the client %v (%s)", key, user, ctx, of, want, e.OpenFeatureReason())
				}
			}
		}
	}
	round()
	// A segment's change is a change of every feature using it: the client
	// follows it, and agrees again.
	if _, err := s.Svc.UpdateSegment(bg, "staff", "", []feature.Condition{condition("email", feature.OpStartsWith, "vip")}, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	// The server's snapshot holds the features' new versions at once (its
	// revision follows later): wait until the client has them all.
	deadline := time.Now().Add(10 * time.Second)
	for behind := true; behind; {
		behind = false
		for _, key := range keys {
			sf, _ := s.Svc.Snapshot().Feature(key)
			cf, _ := c.Snapshot().Feature(key)
			behind = behind || cf.Version != sf.Version
		}
		if behind && time.Now().After(deadline) {
			t.Fatal("the client lacks new versions 10 s after the segment's change")
		}
		time.Sleep(10 * time.Millisecond)
	}
	round()
	if mismatches > 0 {
		t.Errorf("%d mismatches over %d contexts × %d features", mismatches, nContexts, len(keys))
	}
}
