package web_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

// TestBrowserExperimentHistory: an experiment read on four days (1,000
// more users a day, on converting 20 % and off 10 %) draws on the
// feature's page a chart of on's lift for purchase, one point a day with
// its interval as a band, whose label ends on today's lift as the bar
// says it; first exposures that could not be recorded are a warning.
func TestBrowserExperimentHistory(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	svc, err := rollout.NewService(ctx, db, clock)
	if err != nil {
		t.Fatal(err)
	}
	exps := experiment.NewEnvironmentExperiments(func(env string) experiment.ExperimentStore { return db.In(env) })
	exp := exps.Of(svc)
	if err := exp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	e := api.New(svc, api.Options{Plans: testPlanLimits, Experiments: exps, Routes: web.Routes(svc, web.Options{})})
	a := &app{e: e, svc: svc, db: db}
	if _, err := svc.Create(ctx, feature.Feature{Key: "dark-mode", Enabled: true, Salt: "dark-mode",
		Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}}, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := exp.CreateMetric(ctx, experiment.Metric{Key: "purchase", Kind: experiment.MetricConversion, HigherIsBetter: true}, "ada"); err != nil {
		t.Fatal(err)
	}
	x, err := exp.Start(ctx, "dark-mode", experiment.ExperimentRequest{Name: "dark sells", Control: "off", Metrics: []string{"purchase"}}, "ada")
	if err != nil {
		t.Fatal(err)
	}
	user := 0
	for day := range 4 {
		var events []experiment.TrackedEvent
		for range 1000 {
			id := fmt.Sprint("user-", user)
			ev, err := svc.Evaluate("dark-mode", id)
			if err != nil {
				t.Fatal(err)
			}
			rate := 10
			if ev.Bucket == "on" {
				rate = 20
			}
			if user%100 < rate {
				events = append(events, experiment.TrackedEvent{Metric: "purchase", User: id})
			}
			user++
		}
		if _, err := exp.Track(ctx, fmt.Sprint("history-day-", day), events, nil); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		now = now.Add(time.Hour)
		mu.Unlock()
		if _, err := exp.Results(ctx, "dark-mode", x.ID); err != nil { // the day's reading
			t.Fatal(err)
		}
		if day < 3 {
			mu.Lock()
			now = now.Add(23 * time.Hour)
			mu.Unlock()
		}
	}
	if err := db.AddDroppedExposures(ctx, map[string]int64{x.ID: 12}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Minute) // past the cached reading
	mu.Unlock()

	b := startBrowserOn(t, a)
	chart := `li.experiment svg.lift-chart[data-metric=purchase][data-bucket=on]`
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode"), waitFor(chart+` circle.lift-day`))
	if days := evaluate[int](b, `document.querySelectorAll('`+chart+` circle.lift-day').length`); days != 4 {
		t.Errorf("the chart draws %d days, want 4", days)
	}
	if band := evaluate[int](b, `document.querySelector('`+chart+` polygon.lift-band').getAttribute('points').split(' ').length`); band != 8 {
		t.Errorf("the interval's band has %d corners, want 8 (4 days, top and bottom)", band)
	}
	label := evaluate[string](b, `document.querySelector('`+chart+`').getAttribute('aria-label')`)
	m := regexp.MustCompile(`^lift of on on purchase over 4 days, today (\+\d+ %)$`).FindStringSubmatch(label)
	if m == nil {
		t.Fatalf("the chart's label = %q", label)
	}
	bar := evaluate[string](b, `document.querySelector('li.experiment .lift-bar').getAttribute('aria-label')`)
	if !regexp.MustCompile(`^lift ` + regexp.QuoteMeta(m[1]) + `, `).MatchString(bar) {
		t.Errorf("the chart ends on %s, the bar says %q", m[1], bar)
	}
	if got := b.text(`li.experiment .exp-dropped`); !regexp.MustCompile(`^12 first exposures could not be recorded`).MatchString(got) {
		t.Errorf("dropped exposures warning = %q", got)
	}
	b.screenshot("experiment-history", 1280)
}
