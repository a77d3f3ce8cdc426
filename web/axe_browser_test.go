package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/ramp"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
	"github.com/rollout/rollout/webhook"
)

// axeScript is axe-core, which testdata/axe installs (npm ci there, as
// .ci/run does).
const axeScript = "testdata/axe/node_modules/axe-core/axe.min.js"

// loadAxe reads axe-core; without it the test is skipped, unless CI=true:
// CI must run it.
func loadAxe(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(axeScript)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("axe-core is required in CI: %v (npm ci in web/testdata/axe)", err)
		}
		t.Skipf("no axe-core: %v (npm ci in web/testdata/axe)", err)
	}
	return string(src)
}

// axeViolation is one rule a page breaks, as axe-core reports it.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  []any  `json:"target"`
		Summary string `json:"failureSummary"`
	} `json:"nodes"`
}

func (v axeViolation) String() string {
	var nodes []string
	for i, n := range v.Nodes {
		if i == 3 {
			nodes = append(nodes, fmt.Sprintf("and %d more", len(v.Nodes)-3))
			break
		}
		nodes = append(nodes, fmt.Sprint(n.Target)+" ("+strings.ReplaceAll(n.Summary, "\n", " ")+")")
	}
	return fmt.Sprintf("%s (%s): %s: %s", v.ID, v.Impact, v.Help, strings.Join(nodes, "; "))
}

// axe runs every rule of axe-core (WCAG 2.2 A and AA and best practices)
// on the page as it is, and returns what it breaks.
func (b *browser) axe(src string) []axeViolation {
	b.t.Helper()
	if !evaluate[bool](b, `typeof window.axe === 'object'`) {
		evaluate[bool](b, src+"\n;true")
	}
	out, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ['violations']}).then(r => JSON.stringify(r.violations))`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("axe: %v", err)
	}
	var vs []axeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		b.t.Fatalf("axe's answer: %v", err)
	}
	return vs
}

// fullApp is the dashboard with everything it can show: environments,
// tokens and sign-in, webhooks and experiments, over a temporary SQLite
// database; admin is an admin's token.
func fullApp(t *testing.T) (a *app, admin string) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	envs, err := rollout.NewEnvironments(ctx, db, func(env string) rollout.Store { return db.In(env) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	prod, _ := envs.Service(rollout.Production)
	tokens, err := auth.NewTokens(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, admin, err = tokens.Create(ctx, "ada", auth.RoleAdmin, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	access := api.NewAuth(tokens, nil)
	hooks := webhook.NewHooks(db, nil)
	exps := experiment.NewEnvironmentExperiments(func(env string) experiment.ExperimentStore { return db.In(env) })
	if err := exps.Of(prod).Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	e := api.New(prod, api.Options{Auth: access, Plans: testPlanLimits, Environments: envs, Webhooks: hooks, Experiments: exps,
		Routes: web.Routes(prod, web.Options{SampleUsers: 1000, Environments: envs, Sessions: access, Webhooks: hooks})})
	a = &app{e: e, svc: prod, db: db}
	a.seed(t)
	if _, err := envs.Create(ctx, rollout.Environment{Key: "staging", Name: "Staging"}, rollout.EnvironmentOptions{CopyFrom: rollout.Production}); err != nil {
		t.Fatal(err)
	}
	staging, _ := envs.Service("staging")
	six := 6
	if _, err := staging.Change(ctx, "checkout", change.UpdateBucket("A", &six, nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := prod.CreateSegment(ctx, feature.Segment{Key: "staff", Description: "Our own people",
		Conditions: []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}}}, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	rules := []feature.Rule{{Name: "staff", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"staff"`)}}, Serve: feature.Serve{Bucket: "on"}}}
	for _, c := range []change.Change{change.SetRules(rules), change.SetOverride("alice", "on")} {
		if _, err := prod.Change(ctx, "dark-mode", c, rollout.ChangeOptions{Actor: "ada", Comment: "for the team"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := prod.CreateRamp(ctx, "dark-mode", ramp.Spec{Bucket: "on", Shares: []float64{0.6, 0.8}, Every: time.Hour, Start: time.Now().Add(time.Hour)}, "dana"); err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Create(ctx, feature.Feature{Key: "old-banner", Enabled: true, Buckets: []feature.Bucket{{Name: "on", Replicas: 10}}}, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Archive(ctx, "old-banner", rollout.ChangeOptions{Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	return a, admin
}

// TestBrowserAxe: every page of the dashboard breaks none of axe-core's
// rules (contrast, labels, landmarks, names, ARIA), at 1280 and 390 px, in
// the light and the dark theme; the feature's page with every fold open
// too, and the list with a kill switch's confirmation open. Each page is
// saved as a screenshot.
func TestBrowserAxe(t *testing.T) {
	src := loadAxe(t)
	a, admin := fullApp(t)
	b := startBrowserOn(t, a)
	b.allow(15 * time.Minute)
	pages := []struct {
		name, path, ready string
		then              func()
	}{
		{name: "login", path: "/ui/login", ready: "#token"},
		{name: "list", path: "/ui/", ready: "#features"},
		{name: "list-confirm", path: "/ui/", ready: "#features", then: func() {
			toggle := `form.list-toggle[data-key="checkout"] `
			b.do(chromedp.Click(chromedp.CSS(toggle+"button[type=submit]")), waitFor(toggle+".preview .apply"))
		}},
		{name: "list-tags", path: "/ui/?tag=x", ready: "#features", then: func() { b.do(chromedp.Click(chromedp.CSS("#filter-tags summary"))) }},
		{name: "feature", path: "/ui/features/dark-mode", ready: "#feature-key"},
		{name: "feature-open", path: "/ui/features/dark-mode", ready: "#feature-key", then: func() {
			evaluate[bool](b, `document.querySelectorAll('main details').forEach(d => d.open = true), true`)
		}},
		{name: "feature-staging", path: "/ui/features/checkout?env=staging", ready: "#feature-key"},
		{name: "changes", path: "/ui/changes", ready: "li.change-entry"},
		{name: "archived", path: "/ui/archived", ready: "tr.archived-feature"},
		{name: "segments", path: "/ui/segments", ready: "li.segment"},
		{name: "tokens", path: "/ui/admin/tokens", ready: "#tokens-body tr.token"},
		{name: "webhooks", path: "/ui/admin/webhooks", ready: "#hook-form"},
		{name: "settings", path: "/ui/settings", ready: "main h1"},
		{name: "requests", path: "/ui/requests", ready: "main h1"},
		{name: "inbox", path: "/ui/inbox", ready: "main h1"},
		{name: "environments", path: "/ui/admin/environments", ready: "main h1"},
		{name: "compare", path: "/ui/environments/compare?from=staging&to=production", ready: "#compare-table"},
		{name: "user", path: "/ui/user?user=alice", ready: "main h1"},
		{name: "not-found", path: "/ui/features/nope", ready: "main h1"},
	}
	// axe finds what it should: a field without a label, grey on grey.
	b.do(chromedp.Navigate(b.base+"/ui/login"), waitFor("#token"))
	// (The sign-in page, to someone not signed in, links to no page that
	// needs signing in.)
	if n := evaluate[int](b, `document.querySelectorAll('header .top-nav a, header .env-switch').length`); n != 0 {
		t.Errorf("the sign-in page's header has %d links to other pages, want none", n)
	}
	evaluate[bool](b, `(() => {
		const p = document.createElement('p'); // style through the CSSOM: the policy refuses style attributes
		p.textContent = 'faint';
		p.style.color = '#bbb';
		p.style.background = '#ccc';
		document.querySelector('main').append(document.createElement('input'), p);
		return true;
	})()`)
	found := map[string]bool{}
	for _, v := range b.axe(src) {
		found[v.ID] = true
	}
	if !found["label"] || !found["color-contrast"] {
		t.Fatalf("axe found %v on a page with an unlabelled field and faint text: want label and color-contrast", found)
	}

	for _, p := range pages {
		if p.name == "list" {
			b.signIn(admin)
		}
		for _, width := range []int64{1280, 390} {
			for _, dark := range []bool{false, true} {
				b.do(darkMode(dark), chromedp.EmulateViewport(width, 900), chromedp.Navigate(b.base+p.path), waitFor(p.ready))
				if p.then != nil {
					p.then()
				}
				name := fmt.Sprintf("%s-%d", p.name, width)
				if dark {
					name += "-dark"
				}
				for _, v := range b.axe(src) {
					t.Errorf("%s: %s", name, v)
				}
				// Nothing wider than the window: no page scrolls sideways.
				if wide := evaluate[[]string](b, `document.documentElement.scrollWidth > innerWidth + 1 ? [document.documentElement.scrollWidth + ' px wide', ...[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 1 && !e.closest('.visually-hidden')).slice(0, 3).map(e => e.outerHTML.slice(0, 80))] : []`); len(wide) > 0 {
					t.Errorf("%s is wider than the window: %q", name, wide)
				}
				b.shot(name)
			}
		}
	}
	b.do(darkMode(false), chromedp.EmulateViewport(1280, 900))
	b.checkConsole()
}

// shot saves the whole page as it is as the PNG artifact axe-name.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.artifacts, "axe-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
