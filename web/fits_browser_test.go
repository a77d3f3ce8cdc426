package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/ramp"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

// experimentsApp is newApp with experiments, as the binary serves them.
func experimentsApp(t *testing.T) (*app, *experiment.Experiments) {
	t.Helper()
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
	e := api.New(svc, api.Options{Plans: testPlanLimits, Experiments: exps, Routes: web.Routes(svc, web.Options{SampleUsers: 1000})})
	return &app{e: e, svc: svc, db: db}, exp
}

// seedBusyFeature makes checkout-v2 as a product manager's busy feature
// is: created 50/50 by percentages, rules, a pinned user, several changes,
// a ramp that starts tomorrow, and an experiment with results. search-v3
// has several changes and no ramp.
func seedBusyFeature(t *testing.T, b *browser, exp *experiment.Experiments) {
	t.Helper()
	ctx := context.Background()
	svc := b.app.svc
	b.send("POST", "/api/features", map[string]any{
		"key": "checkout-v2", "description": "The one-page checkout, with saved cards and a wallet button",
		"buckets": []map[string]any{{"name": "off"}, {"name": "on"}}, "targets": map[string]float64{"off": 0.5, "on": 0.5},
		"tags": []string{"checkout", "q4"}, "owner": "team-payments",
	}, 201)
	rules := []feature.Rule{
		{Name: "staff", Conditions: []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}}, Serve: feature.Serve{Bucket: "on"}},
		{Name: "dach", Conditions: []feature.Condition{{Attribute: "country", Op: feature.OpIn, Value: json.RawMessage(`["DE","AT","CH"]`)}}, Serve: feature.Serve{Bucket: "off"}},
	}
	for _, c := range []change.Change{
		change.SetRules(rules),
		change.SetOverride("alice", "on"),
		change.SetOverride("bob", "off"),
	} {
		if _, err := svc.Change(ctx, "checkout-v2", c, rollout.ChangeOptions{Actor: "pat"}); err != nil {
			t.Fatal(err)
		}
	}
	// on grows and shrinks back to its replicas of 50 %: churn to chart,
	// and the split as created.
	f, err := svc.Feature(ctx, "checkout-v2")
	if err != nil {
		t.Fatal(err)
	}
	on, _ := f.Bucket("on")
	for _, r := range []int{on.Replicas * 3 / 2, on.Replicas * 2, on.Replicas} {
		if _, err := svc.Change(ctx, "checkout-v2", change.UpdateBucket("on", &r, nil), rollout.ChangeOptions{Actor: "pat", Comment: "try"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.CreateRamp(ctx, "checkout-v2", ramp.Spec{Bucket: "on", Shares: []float64{0.6, 0.75, 1}, Every: 24 * time.Hour, Start: time.Now().Add(24 * time.Hour)}, "dana"); err != nil {
		t.Fatal(err)
	}
	if _, err := exp.CreateMetric(ctx, experiment.Metric{Key: "purchase", Kind: experiment.MetricConversion, HigherIsBetter: true}, "ada"); err != nil {
		t.Fatal(err)
	}
	if _, err := exp.Start(ctx, "checkout-v2", experiment.ExperimentRequest{Name: "one page sells", Control: "off", Metrics: []string{"purchase"}}, "ada"); err != nil {
		t.Fatal(err)
	}
	var events []experiment.TrackedEvent
	for i := range 2000 {
		user := fmt.Sprintf("user-%d", i)
		ev, err := svc.Evaluate("checkout-v2", user)
		if err != nil {
			t.Fatal(err)
		}
		if rate := map[bool]int{true: 20, false: 10}[ev.Bucket == "on"]; i%100 < rate {
			events = append(events, experiment.TrackedEvent{Metric: "purchase", User: user})
		}
		if len(events) == experiment.MaxTrackBatch || i == 1999 {
			if _, err := exp.Track(ctx, fmt.Sprintf("fits-%04d", i), events, nil); err != nil {
				t.Fatal(err)
			}
			events = nil
		}
	}

	if _, err := svc.Create(ctx, feature.Feature{Key: "search-v3", Enabled: true, Salt: "search-v3",
		Buckets: []feature.Bucket{{Name: "control", Replicas: 100}, {Name: "treatment", Replicas: 100}}}, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{120, 140, 160, 300, 320} {
		if _, err := svc.Change(ctx, "search-v3", change.UpdateBucket("treatment", &r, nil), rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// changeForms are the forms that change a feature, on its page.
const changeForms = `form[data-kind], form[data-ramp], form[data-targeting=rules], form[data-targeting=bucket-by], form[data-targeting=test], #promote-form, form[data-experiment]`

// TestBrowserFeatureFits: a feature's page shows its state first — on or
// off, the shares, the targeting, the live ramp, the latest changes and the
// experiment's results — within two screens of 800 px at 1280 px, with
// every change form folded under its name until chosen; a link or an
// address into a fold opens it. A 50/50 split reads 50.0% / 50.0%, the
// exact shares in titles and under Details. Previews and charts fit: no
// column cut, no label over another.
func TestBrowserFeatureFits(t *testing.T) {
	a, exp := experimentsApp(t)
	b := startBrowserOn(t, a)
	seedBusyFeature(t, b, exp)
	page := b.base + "/ui/features/checkout-v2"
	b.do(chromedp.EmulateViewport(1280, 800), chromedp.Navigate(page), waitFor(`li.experiment .lift-bar`))

	// The state, first.
	type place struct {
		Visible bool
		Bottom  float64
	}
	state := map[string]string{
		"on or off":          ".feature-head .status .badge",
		"the shares":         "#buckets table.buckets",
		"the targeting":      "#targeting .rules-now",
		"the live ramp":      "#ramps li.ramp[data-state=active] table.ramp-steps",
		"the latest changes": "#latest ol.latest",
		"the experiment":     "#experiments li.experiment .exp-results",
	}
	for what, sel := range state {
		q, _ := json.Marshal(sel)
		got := evaluate[place](b, `(e => e ? {visible: e.checkVisibility(), bottom: e.getBoundingClientRect().bottom + scrollY} : {visible: false, bottom: -1})(document.querySelector(`+string(q)+`))`)
		if !got.Visible || got.Bottom > 1600 {
			t.Errorf("%s (%s): shown %v, its bottom at %.0f px; want it shown within 2 × 800 px", what, sel, got.Visible, got.Bottom)
		}
	}
	if got := b.text(`#buckets .legend`); got != "off 50.0% on 50.0%" {
		t.Errorf("the legend of a 50/50 split = %q, want off 50.0%% on 50.0%%", got)
	}
	shares, _ := a.svc.Snapshot().Shares("checkout-v2")
	for _, bucket := range []string{"off", "on"} {
		if got, want := b.shareShown(bucket), shareWant(shares[bucket]); got != want || !strings.HasPrefix(got, "50.0% ") {
			t.Errorf("share of %s = %q, want %q", bucket, got, want)
		}
	}
	b.do(openAt("#ring-details table"))
	if got, want := b.text(`table.ring-replicas tr[data-bucket="on"] td.exact-share`), fmt.Sprintf("%.5f%%", 100*shares["on"]); got != want {
		t.Errorf("the exact share of on under Details = %q, want %q", got, want)
	}
	b.do(chromedp.Click(chromedp.CSS("#ring-details summary")))

	// Every change folded, each opening under its name.
	if shown := evaluate[[]string](b, `[...document.querySelectorAll('`+changeForms+`')].filter(f => f.checkVisibility()).map(f => f.outerHTML.slice(0, 60))`); len(shown) > 0 {
		t.Errorf("change forms shown before they are chosen: %q", shown)
	}
	closed := evaluate[float64](b, `document.documentElement.scrollHeight`)
	folds := evaluate[[]string](b, `[...document.querySelectorAll('main details.fold')].filter(d => d.checkVisibility()).map(d => d.id)`)
	if want := "kill-switch edit-rules edit-bucket-by test-context change-targets change-pins change-rollback change-describe replica-forms change-reshuffle change-archive more-settings"; strings.Join(folds, " ") != want {
		t.Errorf("the page folds %v, want %s", folds, want)
	}
	for _, id := range folds {
		b.do(chromedp.Click(chromedp.CSS("#" + id + " > summary")))
		if n := evaluate[int](b, `[...document.querySelectorAll('#`+id+` form')].filter(f => f.checkVisibility()).length`); n == 0 {
			t.Errorf("opening %s shows no form", id)
		}
	}
	open := evaluate[float64](b, `document.documentElement.scrollHeight`)
	t.Logf("checkout-v2 at 1280 px: %.0f px tall folded, %.0f px with every fold open", closed, open)

	// A link or an address into a fold opens it.
	b.do(chromedp.Navigate(page+"?again=1#change-rollback"), waitFor(`form[data-kind=rollback] button[type=submit]`))
	evaluate[bool](b, `location.hash = 'edit-rules'; true`)
	b.do(waitFor(`form[data-targeting=rules] .add-rule`))
	if open := evaluate[[]string](b, `[...document.querySelectorAll('details.fold[open]')].map(d => d.id)`); strings.Join(open, " ") != "edit-rules change-rollback" {
		t.Errorf("open folds after the links = %v, want edit-rules and change-rollback", open)
	}

	// Charts: no label over another, none out of its chart, at either width.
	for _, width := range []int64{1280, 390} {
		b.do(chromedp.EmulateViewport(width, 800), chromedp.Navigate(page), waitFor("#feature-key"))
		if over := b.overlaps(`svg.over-time, svg.chart`); len(over) > 0 {
			t.Errorf("at %d px these chart labels overlap or stick out: %q", width, over)
		}
		if width == 390 {
			closed := evaluate[float64](b, `document.documentElement.scrollHeight`)
			t.Logf("checkout-v2 at 390 px: %.0f px tall folded", closed)
		}
	}
	b.screenshots("fits-feature")

	// Previews fit: a plan's and a ramp's, wide and narrow.
	for _, width := range []int64{1280, 390} {
		b.do(chromedp.EmulateViewport(width, 800), chromedp.Navigate(b.base+"/ui/features/search-v3"), waitFor("#feature-key"))
		form := `form[data-ramp=create] `
		b.do(openAt(form), fill("#ramp-steps", "60, 75, 90, 95"), fill("#ramp-max-churn", "12"),
			chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(form+`.preview .apply`))
		if cut := b.clipped(form + ".preview"); len(cut) > 0 {
			t.Errorf("at %d px the ramp's preview cuts %q", width, cut)
		}
		if got := evaluate[int](b, `document.querySelectorAll('form[data-ramp=create] .preview td.moved').length`); got < 3 {
			t.Errorf("the ramp's preview has %d cells of users moved, want a step's each", got)
		}
		b.shotsOf(fmt.Sprintf("fits-ramp-preview-%d", width), form+".preview")
		form = `form[data-kind=targets] `
		b.do(unfold("targets"), fill(form+`input[name=target][data-bucket="control"]`, "30"), fill(form+`input[name=target][data-bucket="treatment"]`, "70"),
			chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(form+`.preview .apply`))
		if cut := b.clipped(form + ".preview"); len(cut) > 0 {
			t.Errorf("at %d px the plan's preview cuts %q", width, cut)
		}
	}
	b.do(chromedp.EmulateViewport(1280, 900))
	b.checkConsole()
}

// overlaps lists the labels of the charts sel that overlap another or
// stick out of their chart.
func (b *browser) overlaps(sel string) []string {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	return evaluate[[]string](b, `(() => {
		const out = [];
		for (const svg of document.querySelectorAll(`+string(q)+`)) {
			const box = svg.getBoundingClientRect();
			const texts = [...svg.querySelectorAll('text')].filter(t => t.checkVisibility() && getComputedStyle(t).visibility !== 'hidden' && t.textContent.trim() !== '');
			const rects = texts.map(t => t.getBoundingClientRect());
			rects.forEach((r, i) => {
				if (r.left < box.left - 1 || r.right > box.right + 1) out.push(texts[i].textContent + ' out of its chart');
				for (let j = 0; j < i; j++) {
					const o = rects[j];
					if (r.left < o.right - 0.5 && o.left < r.right - 0.5 && r.top < o.bottom - 0.5 && o.top < r.bottom - 0.5) out.push(texts[j].textContent + ' / ' + texts[i].textContent);
				}
			});
		}
		return out;
	})()`)
}

// clipped lists what of the box sel is cut: a part that scrolls, or a
// cell or line wider than the box.
func (b *browser) clipped(sel string) []string {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	return evaluate[[]string](b, `(() => {
		const box = document.querySelector(`+string(q)+`);
		const r = box.getBoundingClientRect();
		const out = [];
		for (const e of [box, ...box.querySelectorAll('*')]) {
			if (!e.checkVisibility() || e.closest('.visually-hidden')) continue;
			if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible') out.push('scrolls: ' + e.outerHTML.slice(0, 60));
			const er = e.getBoundingClientRect();
			if (er.width > 0 && (er.right > r.right + 1 || er.left < r.left - 1)) out.push('sticks out: ' + e.outerHTML.slice(0, 60));
		}
		if (r.right > document.documentElement.clientWidth + 1) out.push('the box is wider than the page');
		return out;
	})()`)
}
