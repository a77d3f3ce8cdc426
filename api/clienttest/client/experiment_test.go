package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/api/clienttest/internal/testserver"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
)

// post sends body to the server and decodes a 2xx answer into ans.
func post(t *testing.T, url string, body, ans any) {
	t.Helper()
	data, _ := json.Marshal(body)
	res, err := http.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		t.Fatalf("POST %s = %d %s", url, res.StatusCode, got)
	}
	if ans != nil {
		if err := json.Unmarshal(got, ans); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExperimentSimulation is the case: 40,000 users split half
// and half between control (converting 10 %) and treatment (12 %); a
// fifth are served by the server (POST /evaluate) and report purchases
// through POST /api/track, the rest by the in-app client, which reports
// them with Track. The lift's interval holds +20 % and is significant,
// and each user counts once though each is served three times.
func TestExperimentSimulation(t *testing.T) {
	s := testserver.Start(t)
	s.Create(t, feature.Feature{Key: "checkout", Enabled: true, Salt: "exp",
		Buckets: []feature.Bucket{{Name: "control", Replicas: 50}, {Name: "treatment", Replicas: 50}}})
	post(t, s.URL+"/api/metrics", map[string]any{"key": "purchase", "kind": "conversion"}, nil)
	var started struct {
		Experiment experiment.Experiment `json:"experiment"`
	}
	post(t, s.URL+"/api/features/checkout/experiments", map[string]any{"name": "green button", "control": "control", "metrics": []string{"purchase"}}, &started)

	c := newClient(t, client.Config{URL: s.URL, FlushInterval: time.Hour})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(33, 12))
	const users = 40_000
	want := map[string]int64{}
	var events []map[string]any
	batches := 0
	sendEvents := func() {
		if len(events) == 0 {
			return
		}
		batches++
		post(t, s.URL+"/api/track", map[string]any{"batch": fmt.Sprintf("sim-batch-%05d", batches), "events": events}, nil)
		events = nil
	}
	for i := range users {
		user := fmt.Sprintf("user-%d", i)
		var bucket string
		if i%5 == 0 {
			var ans struct {
				Results map[string]struct {
					Bucket string `json:"bucket"`
				} `json:"results"`
			}
			for range 3 {
				post(t, s.URL+"/evaluate", map[string]any{"user": user, "features": []string{"checkout"}}, &ans)
			}
			bucket = ans.Results["checkout"].Bucket
		} else {
			for range 3 {
				e, err := c.Evaluate("checkout", user)
				if err != nil {
					t.Fatal(err)
				}
				bucket = e.Bucket
			}
		}
		want[bucket]++
		rate := 0.10
		if bucket == "treatment" {
			rate = 0.12
		}
		if rng.Float64() < rate {
			if i%5 == 0 {
				events = append(events, map[string]any{"metric": "purchase", "user": user})
				if len(events) == experiment.MaxTrackBatch {
					sendEvents()
				}
			} else if err := c.Track("purchase", user, 1); err != nil {
				t.Fatal(err)
			}
		}
		if i%1000 == 999 { // the client names at most 2,000 users a flush
			if err := c.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	sendEvents()
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	res, err := http.Get(s.URL + "/api/features/checkout/experiments/" + started.Experiment.ID + "/results")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r experiment.ExperimentResults
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, b := range r.Buckets {
		got[b.Bucket] = b.Users
	}
	if got["control"] != want["control"] || got["treatment"] != want["treatment"] || r.MultipleExposures != 0 {
		t.Errorf("results' users = %v (%d multiple), want %v, each user once", got, r.MultipleExposures, want)
	}
	for _, b := range r.Buckets {
		m := b.Metrics["purchase"]
		t.Logf("%s: %d users, %d converted, rate %.4f, ci %v, lift %+v, significant %v", b.Bucket, b.Users, m.UsersConverted, *m.Rate, m.CI, m.Lift, m.Significant)
		if b.Bucket != "treatment" {
			continue
		}
		if m.Lift == nil || !m.Significant || m.Lift.CI[0] > 0.2 || m.Lift.CI[1] < 0.2 {
			t.Errorf("treatment's lift = %+v, significant %v; want an interval holding +20 %% and leaving out 0", m.Lift, m.Significant)
		}
	}
	if r.SRM == nil || r.SRM.Mismatch || r.SRM.Total != users {
		t.Errorf("results' SRM = %+v, want a check of %d users without mismatch", r.SRM, users)
	}
}
