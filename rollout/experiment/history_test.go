package experiment_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout/experiment"
)

// TestExperimentDroppedExposures: first exposures beyond what the queue
// holds between two flushes are dropped, and the results say how many.
func TestExperimentDroppedExposures(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc, x := experimentSetup(t, func() time.Time { return now })
	exp, err := x.Start(ctx, "checkout", experiment.ExperimentRequest{Name: "flood", Control: "control", Metrics: []string{"purchase"}}, "ada")
	if err != nil {
		t.Fatal(err)
	}
	const held, over = 500, 70
	x.SetMaxPending(held)
	for i := range held + over {
		if _, err := svc.Evaluate("checkout", fmt.Sprint("user-", i)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := x.Results(ctx, "checkout", exp.ID)
	if err != nil {
		t.Fatalf("Results() = %v", err)
	}
	var users int64
	for _, b := range res.Buckets {
		users += b.Users
	}
	if res.DroppedExposures != over || users != held {
		t.Errorf("Results() = %d users, %d dropped; want %d and %d", users, res.DroppedExposures, held, over)
	}
	if got, err := x.Get(ctx, "checkout", exp.ID); err != nil || got.DroppedExposures != over {
		t.Errorf("Get() = %d dropped, %v; want %d stored", got.DroppedExposures, err, over)
	}
}

// TestExperimentHistory: each day's reading of the results is kept, one a
// day whatever the reads, and results give each bucket's lift per metric
// over those days, oldest first; a stopped experiment's history stops.
func TestExperimentHistory(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	svc, x := experimentSetup(t, func() time.Time { return now })
	exp, err := x.Start(ctx, "checkout", experiment.ExperimentRequest{Name: "days", Control: "control", Metrics: []string{"purchase", "basket"}}, "ada")
	if err != nil {
		t.Fatal(err)
	}
	user := 0
	for day := range 3 {
		var events []experiment.TrackedEvent
		for range 400 { // 400 more users a day, a third of them buy
			u := fmt.Sprint("user-", user)
			user++
			if _, err := svc.Evaluate("checkout", u); err != nil {
				t.Fatal(err)
			}
			if user%3 == 0 {
				events = append(events, experiment.TrackedEvent{Metric: "purchase", User: u, At: now.Add(time.Minute)})
			}
		}
		if _, err := x.Track(ctx, fmt.Sprintf("batch-day-%d", day), events, nil); err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Hour)
		for range 2 { // read twice a day
			if _, err := x.Results(ctx, "checkout", exp.ID); err != nil {
				t.Fatalf("day %d: Results() = %v", day, err)
			}
			now = now.Add(time.Minute)
		}
		now = now.Add(22 * time.Hour)
	}
	res, err := x.Results(ctx, "checkout", exp.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range res.Buckets {
		for metric, m := range b.Metrics {
			switch {
			case b.Control && len(m.History) != 0:
				t.Errorf("control's %s history = %+v, want none", metric, m.History)
			case !b.Control && len(m.History) != 4:
				t.Errorf("%s's %s history has %d days, want 4 (three days read, and today)", b.Bucket, metric, len(m.History))
			case !b.Control:
				for i, p := range m.History {
					if i > 0 && p.At.Truncate(24*time.Hour) == m.History[i-1].At.Truncate(24*time.Hour) {
						t.Errorf("%s history: two points on %v", metric, p.At)
					}
				}
				if last := m.History[len(m.History)-1]; metric == "purchase" && (last.Lift == nil || *last.Lift != *m.Lift) {
					t.Errorf("%s history's last point %+v, want today's lift %+v", metric, last.Lift, m.Lift)
				}
			}
		}
	}
	if _, err := x.Stop(ctx, "checkout", exp.ID, "ada"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(48 * time.Hour)
	res, err = x.Results(ctx, "checkout", exp.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range res.Buckets {
		if m := b.Metrics["purchase"]; !b.Control && len(m.History) != 4 {
			t.Errorf("history after the stop has %d days, want still 4", len(m.History))
		}
	}
}

// TestEventRetention: the daily job deletes tracked events older than the
// retention (90 days by default) and keeps the others; a negative
// retention keeps them all.
func TestEventRetention(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, x := experimentSetup(t, func() time.Time { return now })
	track := func(batch string, n int) {
		t.Helper()
		events := make([]experiment.TrackedEvent, n)
		for i := range events {
			events[i] = experiment.TrackedEvent{Metric: "purchase", User: fmt.Sprint("u", i)}
		}
		if _, err := x.Track(ctx, batch, events, nil); err != nil {
			t.Fatal(err)
		}
	}
	track("batch-old-1", 30)
	now = now.Add(60 * 24 * time.Hour)
	track("batch-new-1", 20)
	now = now.Add(31 * 24 * time.Hour) // the first 91 days old, the others 31

	x.SetEventRetention(-1)
	if n, err := x.PurgeEvents(ctx); n != 0 || err != nil {
		t.Errorf("PurgeEvents() keeping events forever = %d, %v; want 0", n, err)
	}
	x.SetEventRetention(0)
	if n, err := x.PurgeEvents(ctx); n != 30 || err != nil {
		t.Errorf("PurgeEvents() = %d, %v; want the 30 events older than 90 days", n, err)
	}
	if err := x.Daily(ctx); err != nil {
		t.Errorf("Daily() = %v", err)
	}
	x.SetEventRetention(24 * time.Hour)
	if n, err := x.PurgeEvents(ctx); n != 20 || err != nil {
		t.Errorf("PurgeEvents() with a day's retention = %d, %v; want the other 20", n, err)
	}
}
