package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

// envApp is the API and dashboard over the environments of a new SQLite
// database: production, protected, and staging, made as a copy of it once
// checkout (A, B, C with 3 replicas each) and dark-mode exist; then
// checkout changes in staging alone (A grows to 6 replicas). With tokens,
// access is enforced and the tokens are returned by name: "ada" (admin),
// "sam" (admin scoped to staging).
func envApp(t *testing.T, tokens bool) (*app, *rollout.Environments, map[string]string) {
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
	opts := api.Options{Plans: testPlanLimits, Environments: envs}
	wopts := web.Options{SampleUsers: 1000, Environments: envs}
	secrets := map[string]string{}
	var toks *auth.Tokens
	if tokens {
		if toks, err = auth.NewTokens(ctx, db, nil); err != nil {
			t.Fatal(err)
		}
		access := api.NewAuth(toks, nil)
		opts.Auth, wopts.Sessions = access, access
		_, secret, err := toks.Create(ctx, "ada", auth.RoleAdmin, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		secrets["ada"] = secret
	}
	opts.Routes = web.Routes(prod, wopts)
	a := &app{e: api.New(prod, opts), svc: prod, db: db}
	a.seed(t)
	// checkout without D, as the example.
	if _, err := prod.Change(ctx, "checkout", change.RemoveBucket("D"), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := envs.Create(ctx, rollout.Environment{Key: "staging", Name: "Staging"}, rollout.EnvironmentOptions{CopyFrom: rollout.Production}); err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, err := envs.Update(ctx, rollout.Production, rollout.EnvironmentPatch{Protected: &yes}, rollout.EnvironmentOptions{}); err != nil {
		t.Fatal(err)
	}
	if toks != nil {
		_, secret, err := toks.CreateIn(ctx, "sam", auth.RoleAdmin, "staging", time.Now(), "test")
		if err != nil {
			t.Fatal(err)
		}
		secrets["sam"] = secret
	}
	staging, _ := envs.Service("staging")
	six := 6
	if _, err := staging.Change(ctx, "checkout", change.UpdateBucket("A", &six, nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	return a, envs, secrets
}

// promoteDryRun is the API's dry run of promoting checkout from staging
// to production, with If-Match of production's ETag.
func promoteDryRun(t *testing.T, base string, envs *rollout.Environments) feature.Report {
	t.Helper()
	prod, _ := envs.Service(rollout.Production)
	f, _ := prod.Feature(context.Background(), "checkout")
	body, _ := json.Marshal(map[string]any{"from": "staging", "to": "production", "dry_run": true})
	req, _ := http.NewRequest(http.MethodPost, base+"/api/features/checkout/promote", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("If-Match", `"`+f.Tag()+`"`)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Report feature.Report `json:"report"`
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("promote dry run = %d", res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Report
}

// pageShares are the shares the feature page's buckets table shows: to a
// tenth of a point, and exactly.
func (b *browser) pageShares() map[string]string {
	return evaluate[map[string]string](b, `Object.fromEntries([...document.querySelectorAll('td[data-share]')].map(td => [td.dataset.share, td.textContent.trim() + ' exactly ' + td.dataset.exact]))`)
}

// legendShares are the shares the legend of the bar sel shows, as
// pageShares: to a tenth of a point, and exactly (in its title).
func (b *browser) legendShares(sel string) map[string]string {
	q, _ := json.Marshal(sel)
	return evaluate[map[string]string](b, `Object.fromEntries([...document.querySelectorAll(`+string(q)+` + ' li')].map(li => [li.querySelector('.name').textContent, li.querySelector('b.num').textContent + ' exactly ' + li.querySelector('b.num').title.replace(/^Exactly /, '')]))`)
}

// sharesOf are the shares of checkout in env, as the page writes them.
func sharesOf(t *testing.T, envs *rollout.Environments, env string) map[string]string {
	t.Helper()
	svc, _ := envs.Service(env)
	shares, _ := svc.Snapshot().Shares("checkout")
	out := map[string]string{}
	for k, v := range shares {
		out[k] = fmt.Sprintf("%.1f%% exactly %.5f%%", 100*v, 100*v)
	}
	return out
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestBrowserEnvironments: the header names the environment a page shows,
// production in red with a Protected label; switching to staging shows
// staging's configuration, and the links keep it; the feature's page lists
// it in both; the promotion's preview shows the churn the API's dry run
// reports, and applying it makes both environments equal.
func TestBrowserEnvironments(t *testing.T) {
	a, envs, _ := envApp(t, false)
	b := startBrowserOn(t, a)
	prodShares, stagingShares := sharesOf(t, envs, rollout.Production), sharesOf(t, envs, "staging")
	if sameMap(prodShares, stagingShares) {
		t.Fatalf("the fixture's environments have the same shares %v", prodShares)
	}

	// Production: its name, red, labelled Protected.
	b.do(chromedp.Navigate(b.base+"/ui/features/checkout"), waitFor("#feature-key"))
	if got := b.text("#env-name"); got != "Production" {
		t.Errorf("the header names environment %q, want Production", got)
	}
	if got := b.text("#env-protected"); got != "PROTECTED" && got != "Protected" {
		t.Errorf("production's label = %q, want Protected", got)
	}
	prodColour := evaluate[string](b, `getComputedStyle(document.querySelector('header.top')).backgroundColor`)
	if got := b.pageShares(); !sameMap(got, prodShares) {
		t.Errorf("production's page shows shares %v, want %v", got, prodShares)
	}
	b.shots("env-header-production", "header.top")

	// Switch to staging from the header.
	b.do(chromedp.Click(chromedp.CSS("#env-switch summary")), waitFor(`#env-switch a[data-env="staging"]`),
		chromedp.Click(chromedp.CSS(`#env-switch a[data-env="staging"]`)), waitFor(`body[data-env="staging"] #feature-key`))
	if got := b.text("#env-name"); got != "Staging" {
		t.Errorf("after switching the header names %q, want Staging", got)
	}
	if n := evaluate[int](b, `document.querySelectorAll('#env-protected').length`); n != 0 {
		t.Error("staging is labelled protected")
	}
	if c := evaluate[string](b, `getComputedStyle(document.querySelector('header.top')).backgroundColor`); c == prodColour {
		t.Errorf("staging's header has production's colour %s", c)
	}
	if got := evaluate[string](b, `location.search`); got != "?env=staging" {
		t.Errorf("staging's page is at %q, want ?env=staging", got)
	}
	if got := b.pageShares(); !sameMap(got, stagingShares) {
		t.Errorf("staging's page shows shares %v, want %v", got, stagingShares)
	}
	// The links keep the environment: the features list, then the feature.
	b.do(chromedp.Click(chromedp.CSS(`.top-nav a:first-child`)), waitFor(`tr[data-key="checkout"]`))
	if got := b.text("#env-name"); got != "Staging" {
		t.Errorf("the list reached from staging shows %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(`tr[data-key="checkout"] a.key`)), waitFor("#feature-key"))
	if got := b.pageShares(); !sameMap(got, stagingShares) {
		t.Errorf("the feature reached from staging's list shows %v, want staging's %v", got, stagingShares)
	}

	// The feature in every environment.
	rows := evaluate[[]string](b, `[...document.querySelectorAll('#envs-table tbody tr')].map(r => r.dataset.env + ':' + r.dataset.version)`)
	if len(rows) != 2 || rows[0] != "production:3" || rows[1] != "staging:2" {
		t.Errorf("environments table rows = %v, want production:3 and staging:2", rows)
	}
	b.shots("env-header-staging", "header.top")
	b.shots("env-feature-environments", "#environments")

	// Promote staging to production: the preview's churn is the API's.
	want := promoteDryRun(t, b.base, envs)
	if want.Churn == 0 {
		t.Fatal("the promotion moves no user: the fixture tests nothing")
	}
	b.do(openAt("#promote-form"), chromedp.Click(chromedp.CSS("#promote-form button[type=submit]")), waitFor("#promote-form .preview .apply"))
	out := b.text("#promote-form .preview .outcome")
	if wantOut := fmt.Sprintf("%.2f%% of users in Production would move", 100*want.Churn); !strings.HasPrefix(out, wantOut) {
		t.Errorf("promote preview = %q, want it to start %q (the API's dry run)", out, wantOut)
	}
	for _, m := range want.Moves {
		line := fmt.Sprintf("%s → %s %.2f%%", m.From, m.To, 100*m.Share)
		if got := b.text("#promote-form .preview"); !strings.Contains(got, line) {
			t.Errorf("promote preview %q lacks the move %q", got, line)
		}
	}
	b.shots("env-promote-preview", "#environments")
	prod, _ := envs.Service(rollout.Production)
	if f, _ := prod.Feature(context.Background(), "checkout"); f.Version != 3 {
		t.Fatalf("the preview changed production: version %d", f.Version)
	}
	b.do(chromedp.Click(chromedp.CSS("#promote-form .preview .apply")), waitFor(`body[data-env="production"] #banner[data-version="4"]`))
	if got := b.text("#env-name"); got != "Production" {
		t.Errorf("after the promotion the page shows %q, want Production", got)
	}
	if got := b.text("#banner h2"); !strings.HasPrefix(got, fmt.Sprintf("%.2f%% of users moved", 100*want.Churn)) {
		t.Errorf("banner after the promotion = %q", got)
	}
	if got, want := b.pageShares(), sharesOf(t, envs, "staging"); !sameMap(got, want) {
		t.Errorf("production after the promotion shows %v, want staging's %v", got, want)
	}
	diffs, err := envs.Compare("staging", rollout.Production)
	if err != nil || len(diffs) != 0 {
		t.Errorf("after the promotion the environments differ: %+v, %v", diffs, err)
	}

	// A change form on staging's page changes staging alone: the kill
	// switch's preview and its change go to staging, and the page that
	// follows is staging's.
	b.do(chromedp.Navigate(b.base+"/ui/features/checkout?env=staging"), waitFor("#feature-key"), unfold("toggle"),
		chromedp.Click(chromedp.CSS(`form[data-kind=toggle] button[type=submit]`)), waitFor(`form[data-kind=toggle] .preview .apply`))
	b.confirmBig(`form[data-kind=toggle] `)
	b.do(chromedp.Click(chromedp.CSS(`form[data-kind=toggle] .preview .apply`)), waitFor(`body[data-env="staging"] #banner[data-version="3"]`))
	staging, _ := envs.Service("staging")
	if f, _ := staging.Feature(context.Background(), "checkout"); f.Enabled {
		t.Error("the kill switch on staging's page left staging on")
	}
	if f, _ := prod.Feature(context.Background(), "checkout"); !f.Enabled || f.Version != 4 {
		t.Errorf("the kill switch on staging's page changed production: enabled %v, version %d", f.Enabled, f.Version)
	}
	b.checkConsole()
}

// TestBrowserCompare: the compare page lists the feature configured
// differently, side by side; its one-click preview shows the API's churn,
// and applying it leaves nothing to compare.
func TestBrowserCompare(t *testing.T) {
	a, envs, _ := envApp(t, false)
	b := startBrowserOn(t, a)
	b.do(chromedp.Navigate(b.base+"/ui/environments/compare?from=staging&to=production"), waitFor("#compare-table"))
	rows := evaluate[[]string](b, `[...document.querySelectorAll('#compare-table tr.compare-row')].map(r => r.dataset.key + ':' + r.querySelector('.differs').textContent)`)
	if len(rows) != 1 || rows[0] != "checkout:buckets" {
		t.Errorf("compare rows = %v, want checkout:buckets alone", rows)
	}
	if got, want := b.legendShares(`tr[data-key="checkout"] .side-from .legend`)["A"], sharesOf(t, envs, "staging")["A"]; got != want {
		t.Errorf("staging's side shows A at %q, want A's share in staging, %q", got, want)
	}
	if got, want := b.legendShares(`tr[data-key="checkout"] .side-to .legend`)["A"], sharesOf(t, envs, rollout.Production)["A"]; got != want {
		t.Errorf("production's side shows A at %q, want A's share in production, %q", got, want)
	}
	want := promoteDryRun(t, b.base, envs)
	b.do(chromedp.Click(chromedp.CSS(`tr[data-key="checkout"] form.compare-promote button[type=submit]`)), waitFor(`tr[data-key="checkout"] .preview .apply`))
	if got, w := b.text(`tr[data-key="checkout"] .preview .outcome`), fmt.Sprintf("%.2f%% of users in Production would move", 100*want.Churn); !strings.HasPrefix(got, w) {
		t.Errorf("compare preview = %q, want it to start %q", got, w)
	}
	b.screenshots("env-compare")
	b.shots("env-compare-table", "#compare-table")
	b.do(chromedp.Click(chromedp.CSS(`tr[data-key="checkout"] .preview .apply`)), waitFor(`#banner[data-version="4"]`))
	b.do(chromedp.Navigate(b.base+"/ui/environments/compare?from=staging&to=production"), waitFor("#compare-same"))
	b.checkConsole()
}

// TestBrowserPromoteStale: a promotion is refused, and says which side
// moved on, when the target or the source changed after the page loaded.
func TestBrowserPromoteStale(t *testing.T) {
	a, envs, _ := envApp(t, false)
	b := startBrowserOn(t, a)
	ctx := context.Background()
	prod, _ := envs.Service(rollout.Production)
	staging, _ := envs.Service("staging")
	seven := 7

	// The target changes between the preview and Apply.
	b.do(chromedp.Navigate(b.base+"/ui/features/checkout?env=staging"), waitFor("#promote"), openAt("#promote-form"))
	b.do(chromedp.Click(chromedp.CSS("#promote-form button[type=submit]")), waitFor("#promote-form .preview .apply"))
	if _, err := prod.Change(ctx, "checkout", change.UpdateBucket("B", &seven, nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Click(chromedp.CSS("#promote-form .preview .apply")), waitFor("#promote-form .error"))
	if got := b.text("#promote-form .error"); !strings.HasPrefix(got, "Production has changed since this page was loaded") {
		t.Errorf("stale target's error = %q", got)
	}
	if f, _ := prod.Feature(ctx, "checkout"); f.Version != 4 {
		t.Errorf("production is at version %d after a refused promotion, want 4", f.Version)
	}

	// The source changes before the preview.
	b.do(chromedp.Navigate(b.base+"/ui/features/checkout?env=staging"), waitFor("#promote"), openAt("#promote-form"))
	if _, err := staging.Change(ctx, "checkout", change.UpdateBucket("C", &seven, nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Click(chromedp.CSS("#promote-form button[type=submit]")), waitFor("#promote-form .error"))
	if got := b.text("#promote-form .error"); !strings.HasPrefix(got, "Staging has changed since this page was loaded") {
		t.Errorf("stale source's error = %q", got)
	}
	b.checkConsole()
}

// TestBrowserEnvironmentsAdmin: an admin creates an environment as a copy,
// renames and protects it, and its deletion is refused with the API's
// reason while a token is scoped to it; a token scoped to staging sees
// staging alone.
func TestBrowserEnvironmentsAdmin(t *testing.T) {
	a, envs, secrets := envApp(t, true)
	b := startBrowserOn(t, a)
	b.signIn(secrets["ada"])
	b.do(chromedp.Navigate(b.base+"/ui/admin/environments"), waitFor("#env-form"))
	b.do(fill("#env-key", "dev"), fill("#env-name-field", "Development"),
		chromedp.SetValue(chromedp.CSS("#env-copy"), "staging"),
		chromedp.Click(chromedp.CSS("#env-form button[type=submit]")), waitFor(`tr[data-env="dev"]`))
	if got := b.text("#env-done"); got != "Environment dev created as a copy of staging." {
		t.Errorf("after creating: %q", got)
	}
	dev, ok := envs.Service("dev")
	staging, _ := envs.Service("staging")
	if !ok {
		t.Fatal("dev was not created")
	}
	ds, _ := dev.Snapshot().Shares("checkout")
	ss, _ := staging.Snapshot().Shares("checkout")
	if fmt.Sprint(ds) != fmt.Sprint(ss) {
		t.Errorf("dev's checkout serves %v, staging's %v: not a copy", ds, ss)
	}
	b.do(fill("#rename-dev", "Dev box"), chromedp.Click(chromedp.CSS(`form.env-rename[data-env="dev"] button`)), waitFor(`#rename-dev[value="Dev box"]`))
	if got := b.text("#env-done"); got != "Environment dev renamed Dev box." {
		t.Errorf("after renaming: %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(`input.env-protect[data-env="dev"]`)), waitFor(`input.env-protect[data-env="dev"][checked]`))
	if got := b.text("#env-done"); got != "Environment dev is protected." {
		t.Errorf("after protecting: %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(`input.env-comment[data-env="dev"]`)), waitFor(`input.env-comment[data-env="dev"][checked]`))
	if got := b.text("#env-done"); got != "Environment dev requires a comment on every change." {
		t.Errorf("after requiring comments: %q", got)
	}
	if e, _ := envs.Get("dev"); e.Name != "Dev box" || !e.Protected || !e.RequireComment {
		t.Errorf("dev is %+v, want named Dev box, protected and requiring comments", e)
	}
	b.screenshots("env-admin")

	// Staging has a token scoped to it: its deletion is refused, with why.
	b.do(chromedp.Click(chromedp.CSS(`button.env-delete[data-env="staging"]`)), waitFor(`tr[data-env="staging"] .confirm-yes`),
		chromedp.Click(chromedp.CSS(`tr[data-env="staging"] .confirm-yes`)), waitFor("#env-error"))
	if got := b.text("#env-error"); !strings.Contains(strings.ToLower(got), "token") {
		t.Errorf("refused deletion says %q, want the scoped token named as the reason", got)
	}
	if _, ok := envs.Get("staging"); !ok {
		t.Error("staging was deleted")
	}
	b.do(chromedp.Click(chromedp.CSS(`button.env-delete[data-env="dev"]`)), waitFor(`tr[data-env="dev"] .confirm-yes`), chromedp.Click(chromedp.CSS(`tr[data-env="dev"] .confirm-yes`)),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-env="dev"]`)), waitFor("#env-done"))
	if got := b.text("#env-done"); got != "Environment dev deleted." {
		t.Errorf("after deleting: %q", got)
	}
	if _, ok := envs.Get("dev"); ok {
		t.Error("dev was not deleted")
	}

	// A token scoped to staging, made on the tokens page.
	b.do(chromedp.Navigate(b.base+"/ui/admin/tokens"), waitFor("#token-env"), fill("#token-name", "stan"),
		chromedp.SetValue(chromedp.CSS("#token-role"), "viewer"), chromedp.SetValue(chromedp.CSS("#token-env"), "staging"),
		chromedp.Click(chromedp.CSS("#token-form button[type=submit]")), waitFor(`tr[data-name="stan"] .token-env`))
	if got := b.text(`tr[data-name="stan"] .token-env`); got != "staging only" {
		t.Errorf("the new token's environment reads %q", got)
	}
	if got := evaluate[string](b, `document.getElementById('token-secret-value').textContent`); status(t, b.base, "/api/features/checkout?env=production", got) != http.StatusForbidden ||
		status(t, b.base, "/api/features/checkout?env=staging", got) != http.StatusOK {
		t.Error("the token made scoped to staging is not refused production and allowed staging")
	}

	// A token scoped to staging: the header shows staging alone, without
	// a ?env=, and no compare link.
	b.do(chromedp.Navigate(b.base+"/ui/"), waitFor("form.signout"), chromedp.Submit(chromedp.CSS("form.signout")), waitFor("#token"))
	b.signIn(secrets["sam"])
	b.do(chromedp.Navigate(b.base+"/ui/features/checkout"), waitFor("#feature-key"))
	if got := b.text("#env-name"); got != "Staging" {
		t.Errorf("a token scoped to staging sees %q", got)
	}
	if n := evaluate[int](b, `document.querySelectorAll('#env-switch a, #envs-table tbody tr:not([data-env="staging"]), .top-nav a[href*="compare"]').length`); n != 0 {
		t.Errorf("a token scoped to staging sees %d links or rows of other environments", n)
	}
	if got := b.pageShares(); !sameMap(got, sharesOf(t, envs, "staging")) {
		t.Errorf("a token scoped to staging sees shares %v, want staging's", got)
	}
	b.checkConsole()
}

// TestEnvironmentPages: pages without a browser: ?env= picks the
// environment, an unknown one is refused, links keep it, and the compare
// page refuses a token scoped to one environment.
func TestEnvironmentPages(t *testing.T) {
	a, _, secrets := envApp(t, true)
	srv := httptest.NewServer(a.e)
	t.Cleanup(srv.Close)
	get := func(path, secret string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body bytes.Buffer
		body.ReadFrom(res.Body)
		return res.StatusCode, body.String()
	}
	code, body := get("/ui/?env=staging", secrets["ada"])
	for _, want := range []string{`<b class="env-name" id="env-name">Staging</b>`, `href="/ui/features/checkout?env=staging"`, `<input type="hidden" name="env" value="staging">`, `data-env-query="env=staging"`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET /ui/?env=staging = %d, lacks %s", code, want)
		}
	}
	code, body = get("/ui/", secrets["ada"])
	if code != 200 || !strings.Contains(body, `id="env-protected"`) || !strings.Contains(body, `href="/ui/features/checkout"`) || !strings.Contains(body, `class="top env-protected"`) {
		t.Errorf("GET /ui/ = %d: production's page lacks its protected header or plain links", code)
	}
	if code, _ := get("/ui/?env=nope", secrets["ada"]); code != http.StatusNotFound {
		t.Errorf("GET /ui/?env=nope = %d, want 404", code)
	}
	if code, _ := get("/ui/?env=production", secrets["sam"]); code != http.StatusForbidden {
		t.Errorf("a token scoped to staging: GET /ui/?env=production = %d, want 403", code)
	}
	if code, body := get("/ui/environments/compare", secrets["sam"]); code != http.StatusForbidden || !strings.Contains(body, "comparing environments needs a token of every environment") {
		t.Errorf("a token scoped to staging: compare = %d", code)
	}
	if code, _ := get("/ui/environments/compare?from=staging&to=nope", secrets["ada"]); code != http.StatusNotFound {
		t.Errorf("compare with an unknown environment = %d, want 404", code)
	}
	if code, body := get("/ui/environments/compare?from=staging&to=staging", secrets["ada"]); code != 200 || !strings.Contains(body, "Pick two different environments") {
		t.Errorf("compare of staging with itself = %d", code)
	}
	if code, _ := get("/ui/admin/environments", secrets["sam"]); code != 200 {
		// A scoped admin may see the page; the API refuses its changes.
		t.Errorf("a scoped admin: environments page = %d", code)
	}
}

// TestBrowserBatchPromote: the compare page promotes the ticked features
// as one batch: its preview gives the API's total churn; a feature that
// moves on after the preview makes Apply refuse the whole batch; applied
// afresh, it leaves nothing to compare.
func TestBrowserBatchPromote(t *testing.T) {
	a, envs, _ := envApp(t, false)
	ctx := context.Background()
	staging, _ := envs.Service("staging")
	prod, _ := envs.Service(rollout.Production)
	fifty := 50
	if _, err := staging.Change(ctx, "dark-mode", change.UpdateBucket("on", &fifty, nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	dry, err := envs.PromoteMany(ctx, []string{"checkout", "dark-mode"}, rollout.PromoteOptions{From: "staging", To: rollout.Production, Change: rollout.ChangeOptions{DryRun: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := startBrowserOn(t, a)
	compare := b.base + "/ui/environments/compare?from=staging&to=production"
	b.do(chromedp.Navigate(compare), waitFor("#batch-promote"),
		chromedp.Click(chromedp.CSS("#batch-promote button[type=submit]")), waitFor("#batch-promote .preview .apply"))
	if got, want := b.text("#batch-promote .batch-total"), fmt.Sprintf("%.2f%%", 100*dry.TotalChurn); got != want {
		t.Errorf("the batch's total = %q, want the API's %q", got, want)
	}
	if n := evaluate[int](b, `document.querySelectorAll('#batch-promote .batch-features li').length`); n != 2 {
		t.Errorf("the batch preview lists %d features, want 2", n)
	}
	b.screenshots("env-batch-promote")

	// Production's dark-mode moves on after the preview: nothing applies.
	ten := 10
	if _, err := prod.Change(ctx, "dark-mode", change.UpdateBucket("on", &ten, nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := prod.Snapshot().Feature("checkout")
	b.do(chromedp.Click(chromedp.CSS("#batch-promote .preview .apply")), waitFor("#batch-promote .error:not([hidden])"))
	if got := b.text("#batch-promote .error"); !strings.Contains(got, "dark-mode") {
		t.Errorf("the stale batch says %q, want dark-mode named", got)
	}
	if after, _ := prod.Snapshot().Feature("checkout"); after.Version != before.Version {
		t.Errorf("a refused batch changed checkout in production: version %d → %d", before.Version, after.Version)
	}

	b.do(chromedp.Navigate(compare), waitFor("#batch-promote"),
		chromedp.Click(chromedp.CSS("#batch-promote button[type=submit]")), waitFor("#batch-promote .preview .apply"),
		chromedp.Click(chromedp.CSS("#batch-promote .preview .apply")), waitFor("#compare-same"))
	b.checkConsole()
}
