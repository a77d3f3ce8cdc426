package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/api/clienttest/internal/testserver"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// TestUserListAgreement: features whose rules use a user list, by the
// user ID and by a bucket_by attribute, alone, within an any-of and beside
// other conditions, answer the same, bit for bit, in the in-app client,
// GET /evaluate, POST /evaluate and OFREP, for random users in and out of
// the list; after an edit of the list the client follows, agrees again,
// and the users that changed answer are among those the edit added and
// removed.
func TestUserListAgreement(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 11))
	s := testserver.Start(t)
	bg := context.Background()
	const listed = 5000
	var users []string
	for i := range listed {
		users = append(users, fmt.Sprintf("u%d", 2*i)) // the even ones
		if i%10 == 0 {
			users = append(users, fmt.Sprintf("org-%d", i)) // and some organizations
		}
	}
	if _, err := s.Svc.CreateUserList(bg, "beta", "testers", users, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	inList := func(v any) feature.Condition { return condition("", feature.OpInSegment, v) }
	buckets := []feature.Bucket{{Name: "off", Replicas: 100, Value: raw(`false`)}, {Name: "on", Replicas: 30, Value: raw(`true`)}, {Name: "B", Replicas: 50, Value: raw(`"b"`)}}
	fs := []feature.Feature{
		{Key: "by-user", Enabled: true, Buckets: buckets, Rules: []feature.Rule{{Name: "beta", Conditions: []feature.Condition{inList("beta")}, Serve: feature.Serve{Bucket: "on"}}}},
		{Key: "by-org", Enabled: true, Buckets: buckets, BucketBy: "org", Rules: []feature.Rule{
			{Name: "beta-or-big", Conditions: []feature.Condition{{Any: []feature.Condition{inList("beta"), condition("plan", feature.OpEq, "enterprise")}}}, Serve: feature.Serve{Bucket: "B"}}}},
		{Key: "mixed", Enabled: true, Buckets: buckets, Overrides: map[string]string{"u4": "off"}, Rules: []feature.Rule{
			{Name: "beta-de", Conditions: []feature.Condition{inList("beta"), condition("country", feature.OpIn, []string{"DE"})}, Serve: feature.Serve{Ring: true}},
			{Name: "beta", Conditions: []feature.Condition{inList("beta")}, Serve: feature.Serve{Bucket: "B"}}}},
	}
	var keys []string
	for _, f := range fs {
		s.Create(t, f)
		keys = append(keys, f.Key)
	}
	c := newClient(t, client.Config{URL: s.URL})
	rulesReachClient(t, c, "by-user")

	type sample struct {
		user string
		ctx  feature.Context
	}
	var samples []sample
	for range 150 {
		ctx := feature.Context{"country": pick(r, []string{"DE", "FR"}), "plan": pick(r, []string{"free", "enterprise"})}
		switch r.IntN(3) {
		case 0:
			ctx["org"] = fmt.Sprintf("org-%d", 10*r.IntN(listed/10)) // listed
		case 1:
			ctx["org"] = fmt.Sprintf("org-%d", 10*r.IntN(listed/10)+5) // not listed
		}
		samples = append(samples, sample{fmt.Sprintf("u%d", r.IntN(2*listed+200)), ctx})
	}
	mismatches := 0
	report := func(format string, args ...any) {
		if mismatches++; mismatches <= 20 {
			t.Errorf(format, args...)
		}
	}
	answers := func() map[string]wire {
		out := map[string]wire{}
		for _, sm := range samples {
			user, ctx := sm.user, sm.ctx
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
				out[key+" "+user+" "+fmt.Sprint(ctx)] = wireOf(e)
				if got := many.Results[key]; !sameWire(got, wireOf(e)) {
					report("POST /evaluate %s for %s %v = %v; the client %v", key, user, ctx, got, wireOf(e))
				}
				q.Set("feature", key)
				q.Set("user", user)
				res, err := http.Get(s.URL + "/evaluate?" + q.Encode())
				if err != nil {
					t.Fatal(err)
				}
				var one wire
				json.NewDecoder(res.Body).Decode(&one)
				res.Body.Close()
				if qe, _ := c.EvaluateContext(key, user, qctx); !sameWire(one, wireOf(qe)) {
					report("GET /evaluate %s for %s ?%s = %v; the client %v", key, user, q.Encode(), one, wireOf(qe))
				}
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
		return out
	}
	before := answers()
	matched := 0
	for _, w := range before {
		if w.Rule != "" {
			matched++
		}
	}
	if matched == 0 || matched == len(before) {
		t.Fatalf("%d of %d evaluations matched a rule: the samples do not cover users in and out of the list", matched, len(before))
	}

	// An edit: the client follows it and agrees again; only the users it
	// added or removed answer otherwise.
	add, remove := []string{}, []string{}
	for i := range 40 {
		add = append(add, fmt.Sprintf("u%d", 2*i+1))
		remove = append(remove, fmt.Sprintf("u%d", 2*i+100))
	}
	add = append(add, "org-5", "org-15")
	remove = append(remove, "org-10")
	if _, err := s.Svc.EditUserList(bg, "beta", add, remove, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for behind := true; behind; {
		behind = false
		for _, key := range keys {
			sf, _ := s.Svc.Snapshot().Feature(key)
			cf, _ := c.Snapshot().Feature(key)
			behind = behind || cf.Version != sf.Version
		}
		if behind && time.Now().After(deadline) {
			t.Fatal("the client lacks the new versions 10 s after the list's edit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	after := answers()
	moved := map[string]bool{}
	for _, u := range append(add, remove...) {
		moved[u] = true
	}
	for _, sm := range samples {
		for _, key := range keys {
			k := key + " " + sm.user + " " + fmt.Sprint(sm.ctx)
			org, _ := sm.ctx["org"].(string)
			if b, a := before[k], after[k]; (b.Rule != a.Rule || !sameWire(wire{Bucket: b.Bucket, Value: b.Value, Reason: b.Reason, Rule: b.Rule}, wire{Bucket: a.Bucket, Value: a.Value, Reason: a.Reason, Rule: a.Rule})) && !moved[sm.user] && !moved[org] {
				t.Errorf("%s changed answer (%v → %v) though the edit neither added nor removed it", k, b, a)
			}
		}
	}
	if mismatches > 0 {
		t.Errorf("%d mismatches over %d samples × %d features", mismatches, len(samples), len(keys))
	}
}
