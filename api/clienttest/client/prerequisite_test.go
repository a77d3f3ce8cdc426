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
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// TestPrerequisiteAgreement: over random features (TestContextAgreement's:
// rules, bucket_by, overrides, the kill switch) of which many require
// others in layers (chains of up to 4 links, each prerequisite some of
// A, B, C), and random contexts, the in-app client answers what the
// server answers, bit for bit, on each path — POST /evaluate, GET
// /evaluate with ctx. parameters, and OFREP, whose metadata names the
// failed prerequisite — and some answers are prerequisite_failed.
func TestPrerequisiteAgreement(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 32))
	s := testserver.Start(t)
	bg := context.Background()
	for _, seg := range []feature.Segment{
		{Key: "staff", Conditions: []feature.Condition{condition("email", feature.OpEndsWith, "@example.com")}},
		{Key: "paying", Conditions: []feature.Condition{condition("plan", feature.OpIn, []string{"pro", "enterprise"})}},
	} {
		if _, err := s.Svc.CreateSegment(bg, seg, rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nFeatures, nContexts := 20, 60
	if testing.Short() {
		nFeatures, nContexts = 10, 20
	}
	var keys []string
	for i := range nFeatures {
		f := randomFeature(r, fmt.Sprintf("p%02d", i))
		if f.Fallback == "" && r.IntN(2) == 0 {
			f.Fallback = "A"
		}
		s.Create(t, f)
		keys = append(keys, f.Key)
	}
	// Layers of 4: a feature requires 1 to 3 of the layers below its own.
	required := 0
	for i := 4; i < nFeatures; i++ {
		var ps []feature.Prerequisite
		for _, j := range r.Perm(i / 4 * 4)[:1+r.IntN(3)] {
			bs := []string{"A", "B", "C"}[:1+r.IntN(2)]
			ps = append(ps, feature.Prerequisite{Feature: keys[j], Buckets: bs})
		}
		if _, err := s.Svc.Change(bg, keys[i], change.SetPrerequisites(ps), rollout.ChangeOptions{}); err != nil {
			t.Fatalf("prerequisites of %s: %v", keys[i], err)
		}
		required++
	}
	c := newClient(t, client.Config{URL: s.URL})
	waitForVersions(t, s, c, keys)
	type pwire struct {
		wire
		Prerequisite string `json:"prerequisite"`
	}
	same := func(a, b pwire) bool { return sameWire(a.wire, b.wire) && a.Prerequisite == b.Prerequisite }
	of := func(e feature.Evaluation) pwire { return pwire{wireOf(e), e.Prerequisite} }
	mismatches, failed := 0, 0
	report := func(format string, args ...any) {
		if mismatches++; mismatches <= 20 {
			t.Errorf(format, args...)
		}
	}
	for i := range nContexts {
		ctx := randomContext(r)
		user := fmt.Sprintf("u%d", r.IntN(10))
		if i%10 == 9 {
			user = "u7"
		}
		var many struct {
			Results map[string]pwire `json:"results"`
		}
		if err := json.Unmarshal(postJSON(t, s.URL+"/evaluate", map[string]any{"user": user, "context": ctx}), &many); err != nil {
			t.Fatal(err)
		}
		q, qctx := queryForm(ctx)
		for _, key := range keys {
			e, err := c.EvaluateContext(key, user, ctx)
			if err != nil {
				t.Fatal(err)
			}
			if e.Reason == feature.ReasonPrerequisiteFailed {
				failed++
			}
			if got := many.Results[key]; !same(got, of(e)) {
				report("POST /evaluate %s for %s %v = %v %s; the client %v %s", key, user, ctx, got.wire, got.Prerequisite, wireOf(e), e.Prerequisite)
			}
			q.Set("feature", key)
			q.Set("user", user)
			res, err := http.Get(s.URL + "/evaluate?" + q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			var one pwire
			json.NewDecoder(res.Body).Decode(&one)
			res.Body.Close()
			if qe, _ := c.EvaluateContext(key, user, qctx); !same(one, of(qe)) {
				report("GET /evaluate %s for %s ?%s = %v; the client %v", key, user, q.Encode(), one, of(qe))
			}
			body := map[string]any{"targetingKey": user}
			for k, v := range ctx {
				body[k] = v
			}
			var o struct {
				Value    json.RawMessage `json:"value"`
				Variant  string          `json:"variant"`
				Reason   string          `json:"reason"`
				Metadata struct {
					Version      int    `json:"version"`
					Rule         string `json:"rule"`
					Prerequisite string `json:"prerequisite"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(postJSON(t, s.URL+"/ofrep/v1/evaluate/flags/"+key, map[string]any{"context": body}), &o); err != nil {
				t.Fatal(err)
			}
			got := pwire{wire{Value: o.Value, Version: o.Metadata.Version, Reason: e.Reason, Rule: o.Metadata.Rule}, o.Metadata.Prerequisite}
			if o.Variant != "" {
				got.Bucket = &o.Variant
			} else {
				got.Value = raw("null")
			}
			if !same(got, of(e)) || o.Reason != e.OpenFeatureReason() {
				report("OFREP %s for %s %v = %+v; the client %v (%s)", key, user, ctx, o, of(e), e.OpenFeatureReason())
			}
		}
	}
	if mismatches > 0 {
		t.Errorf("%d mismatches over %d contexts × %d features", mismatches, nContexts, len(keys))
	}
	if failed == 0 {
		t.Errorf("no answer was prerequisite_failed over %d features with prerequisites: the test tests nothing", required)
	}
}

// waitForVersions waits until the client holds the server's version of
// every feature of keys.
func waitForVersions(t *testing.T, s *testserver.Server, c *client.Client, keys []string) {
	t.Helper()
	for range 1000 {
		behind := false
		for _, key := range keys {
			sf, _ := s.Svc.Snapshot().Feature(key)
			cf, _ := c.Snapshot().Feature(key)
			behind = behind || cf.Version != sf.Version
		}
		if !behind {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the client lacks the server's versions after 10 s")
}
