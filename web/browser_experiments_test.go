package web_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

// TestBrowserExperiment: on dark-mode (off and on, half each) a product
// manager starts an experiment on the metric purchase from the feature's
// page, which says "not enough data yet"; after 4,000 users, the on bucket
// converting 20 % and off 10 %, the page says in words that on converts
// more, by how much with its interval, and that it is significant, with
// the lift drawn as a bar; they stop it, and the page says stopped.
func TestBrowserExperiment(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := rollout.NewService(ctx, db, nil)
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
	b := startBrowserOn(t, a)
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode"), waitFor("#start-experiment"), openAt("form[data-experiment=start]"), waitFor(`form[data-experiment=start] input[name=metric]`))
	if got := b.text("#no-experiments"); got != "No experiments yet." {
		t.Errorf("no experiments = %q", got)
	}
	b.do(fill("#exp-name", "dark sells"), chromedp.SetValue(chromedp.CSS("#exp-control"), "off"),
		chromedp.Click(chromedp.CSS(`input[name=metric][value=purchase]`)),
		chromedp.Click(chromedp.CSS(`form[data-experiment=start] button[type=submit]`)),
		waitFor(`li.experiment[data-state=running] .exp-sentence`))
	if got := b.text(`li.experiment .exp-sentence`); got != "on converts 0.0 % vs 0.0 %: not enough data yet" {
		t.Errorf("results before any user = %q", got)
	}
	if hidden := evaluate[bool](b, `document.querySelector('form[data-experiment=start]').hidden`); !hidden {
		t.Error("the page offers a second experiment while one runs")
	}

	var events []experiment.TrackedEvent
	batch := 0
	for i := range 4000 {
		user := fmt.Sprintf("user-%d", i)
		ev, err := svc.Evaluate("dark-mode", user)
		if err != nil {
			t.Fatal(err)
		}
		rate := 10
		if ev.Bucket == "on" {
			rate = 20
		}
		if i%100 < rate {
			events = append(events, experiment.TrackedEvent{Metric: "purchase", User: user})
		}
		if len(events) == experiment.MaxTrackBatch || i == 3999 {
			batch++
			if _, err := exp.Track(ctx, fmt.Sprintf("browser-%04d", batch), events, nil); err != nil {
				t.Fatal(err)
			}
			events = nil
		}
	}
	b.do(chromedp.Reload(), waitFor(`li.experiment .lift-bar .lift-interval`))
	got := b.text(`li.experiment .exp-sentence`)
	if !regexp.MustCompile(`^on converts \d+\.\d % vs \d+\.\d %, \+\d+ % \(\+\d+ % to \+\d+ %\), significant$`).MatchString(got) {
		t.Errorf("results = %q, want on's rate against off's, the lift with its interval, significant", got)
	}
	if label := evaluate[string](b, `document.querySelector('li.experiment .lift-bar').getAttribute('aria-label')`); !regexp.MustCompile(`^lift \+\d+ %, interval \+\d+ % to \+\d+ %$`).MatchString(label) {
		t.Errorf("the lift bar's label = %q", label)
	}
	if users := b.text(`li.experiment .exp-users`); !regexp.MustCompile(`^off [\d,]+ users, on [\d,]+ users\.$`).MatchString(users) {
		t.Errorf("users = %q", users)
	}
	b.screenshot("experiment-wide", 1280)
	b.screenshot("experiment-narrow", 390)
	b.do(chromedp.Click(chromedp.CSS(`li.experiment button[data-experiment-action=stop]`)), waitFor(`li.experiment[data-state=stopped]`))
	if hidden := evaluate[bool](b, `document.querySelector('form[data-experiment=start]').hidden`); hidden {
		t.Error("after the stop, the page offers no new experiment")
	}
}
