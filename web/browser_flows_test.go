package web_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/plan"
	"github.com/rollout/rollout/rollout/ramp"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

// TestBrowserTargets: on dark-mode (off and on at 100 replicas each) a
// product manager types 10 % for on and 90 % for off with a comment,
// previews the plan — its exact shares, max error, and its churn beside the
// lower bound in words — applies it, and gets shares within half a point,
// the comment in the history, and the banner once only. Then "split
// equally" with a new bucket.
func TestBrowserTargets(t *testing.T) {
	b := startBrowser(t)
	b.app.seed(t)
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode"), waitFor("#feature-key"), unfold("targets"))

	form := `form[data-kind=targets] `
	on := form + `input[name=target][data-bucket="on"]`
	off := form + `input[name=target][data-bucket="off"]`
	now, _ := b.app.svc.Snapshot().Shares("dark-mode")
	round := func(x float64) float64 { return math.Round(10000*x) / 100 }
	wantStart := fmt.Sprintf("[off=%v on=%v]", round(now["off"]), round(now["on"]))
	if got := evaluate[[]string](b, `[...document.querySelectorAll('form[data-kind=targets] input[name=target]')].map(i => i.dataset.bucket + '=' + i.value)`); fmt.Sprint(got) != wantStart {
		t.Errorf("target fields start at %v, want the shares now %s", got, wantStart)
	}
	// Shares that do not add up are refused before anything is sent.
	b.do(fill(on, "10"), chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(form+".error"))
	if got, want := b.text(form+".error"), fmt.Sprintf("The shares add up to %.2f%%: make them add up to 100%%.", 10+round(now["off"])); got != want {
		t.Errorf("targets not adding up = %q, want %q", got, want)
	}
	b.do(fill(off, "90"), fill("#targets-comment", "10 % of users for the beta"),
		chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(form+".preview .apply"))
	if hidden := evaluate[bool](b, `document.querySelector('form[data-kind=targets] .error').hidden`); !hidden {
		t.Error("the stale error stays beside the preview")
	}

	// The preview says what the planner says.
	planned, report, err := b.app.svc.Plan("dark-mode", map[string]float64{"on": 0.1, "off": 0.9}, plan.Options{Mode: plan.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Moves %.2f%% of users; no plan can move fewer than %.2f%%.", 100*planned.Churn, 100*planned.LowerBound)
	if planned.Churn < planned.LowerBound { // within tolerance, below the exact plans' bound
		want = fmt.Sprintf("Moves %.2f%% of users; no plan that hits the targets exactly can move fewer than %.2f%%; this one moves a little fewer because its shares land within its max error of them.", 100*planned.Churn, 100*planned.LowerBound)
	}
	if got := b.text(form + ".preview .plan-churn"); got != want {
		t.Errorf("plan's churn = %q, want %q", got, want)
	}
	if got := b.text(form + ".preview .plan-error"); !strings.Contains(got, fmt.Sprintf("within %.3f percentage points", 100*planned.MaxError)) {
		t.Errorf("plan's max error = %q, want %.3f points", got, 100*planned.MaxError)
	}
	if got := b.text(form + `.preview tr[data-bucket="on"] td.after`); got != fmt.Sprintf("%.2f%%", 100*planned.SharesAfter["on"]) {
		t.Errorf("preview's share of on = %q, want the plan's %v", got, planned.SharesAfter["on"])
	}
	if n := evaluate[int](b, `document.querySelectorAll('form[data-kind=targets] .preview .modulo').length`); n != 0 {
		t.Error("the preview of new replicas compares with naive mod N")
	}
	// Asked vs achieved, the one re-plan of a coarse feature, nesting and
	// the range-bucketing baseline (issue 21).
	wantAsked := fmt.Sprintf("on: you asked 10%%: %.2f%% (exact: %.5f%%)", 100*planned.SharesAfter["on"], 100*planned.SharesAfter["on"])
	if got := b.text(form + `.preview .plan-asked li[data-bucket="on"]`); got != wantAsked {
		t.Errorf("asked vs achieved = %q, want %q", got, wantAsked)
	}
	if !planned.Replanned || !strings.Contains(b.text(form+".preview .plan-replanned"), "moves users once") {
		t.Errorf("a coarse feature's first plan: replanned %v, the preview says %q", planned.Replanned, b.text(form+".preview .plan-replanned"))
	}
	if got := b.text(form + ".preview .plan-nested"); !strings.HasPrefix(got, "Only the replicas of on change") {
		t.Errorf("nested plan = %q", got)
	}
	if got, want := b.text(form+".preview .range"), fmt.Sprintf("Range bucketing, as LaunchDarkly, Unleash, GrowthBook, Flipt and flagd split users, would move %.2f%%; rollout moves %.2f%%.", 100*report.RangeChurn, 100*report.Churn); got != want {
		t.Errorf("range baseline = %q, want %q", got, want)
	}
	b.screenshot("targets-preview-wide", 1280)
	b.screenshot("targets-preview-narrow", 390)
	b.confirmBig(form)
	b.do(chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="2"]`))

	var f apiFeature
	b.api("/api/features/dark-mode", &f)
	if f.Version != 2 || math.Abs(f.Shares["on"]-0.1) > 0.0005 || math.Abs(f.Shares["off"]-0.9) > 0.0005 {
		t.Errorf("after 10 %% / 90 %%: version %d, shares %v; want version 2 within 0.05 points", f.Version, f.Shares)
	}
	if got := b.text(`#history li[data-version="2"] .comment`); got != "Comment: 10 % of users for the beta" {
		t.Errorf("history's comment = %q", got)
	}
	if got := b.text(`#banner .comment`); got != "Comment: 10 % of users for the beta" {
		t.Errorf("banner's comment = %q", got)
	}
	b.do(wait(`document.readyState === 'complete'`)) // the page's script has run
	if url := evaluate[string](b, `location.search`); url != "" {
		t.Errorf("after applying, the address keeps %q: a reload or a shared link would show the banner again", url)
	}
	// The link with ?changed= shows no banner when opened again.
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode?changed=2"), waitFor("#feature-key"), unfold("targets"))
	if n := evaluate[int](b, `document.querySelectorAll('#banner').length`); n != 0 {
		t.Error("a shared link shows the Applied banner")
	}

	// A new bucket and "split equally": three thirds that add up to 100.
	b.do(chromedp.Click(chromedp.CSS(form+".add-target")), fill(form+`input[name=new-name]`, "beta"),
		chromedp.Click(chromedp.CSS(form+".split-equally")))
	if got := evaluate[[]string](b, `[...document.querySelectorAll('form[data-kind=targets] input[name=target], form[data-kind=targets] input[name=new-target]')].map(i => i.value)`); fmt.Sprint(got) != "[33.34 33.33 33.33]" {
		t.Errorf("split equally = %v", got)
	}
	if got := b.text(form + ".target-sum"); got != "Total: 100%" {
		t.Errorf("total = %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(form+".preview .apply"))
	// 33.34 + 33.33 + 33.33 is equal thirds, exactly: beta grows at the
	// others' expense, a nested plan alone.
	third := 1.0 / 3
	split, _, err := b.app.svc.Plan("dark-mode", map[string]float64{"off": third, "on": third, "beta": third}, plan.Options{Mode: plan.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.text(form + `.preview .plan-asked li[data-bucket="off"]`); !strings.HasPrefix(got, fmt.Sprintf("off: you asked 33.34%% (1/3): %.2f%% (exact: %.5f%%)", 100*split.SharesAfter["off"], 100*split.SharesAfter["off"])) {
		t.Errorf("asked vs achieved of a third = %q", got)
	}
	if n := evaluate[int](b, `document.querySelectorAll('form[data-kind=targets] .preview .plan-choice').length`); n != min(1, len(split.Options)-1) {
		t.Errorf("%d plan choices, want one only when the planner offers both plans (%d)", n, len(split.Options))
	}
	b.screenshot("targets-several-wide", 1280)
	b.screenshot("targets-several-narrow", 390)
	b.confirmBig(form)
	b.do(chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="3"]`))
	b.api("/api/features/dark-mode", &f)
	for _, n := range []string{"off", "on", "beta"} {
		if math.Abs(f.Shares[n]-1.0/3) > 0.0005 { // a third within 0.05 points
			t.Errorf("share of %s after split equally = %v, want a third", n, f.Shares[n])
		}
	}
	// Shares over time: two buckets at versions 1 and 2, three at 3.
	if n := evaluate[int](b, `document.querySelectorAll('#over-time svg rect:not(.churn-bar)').length`); n != 7 {
		t.Errorf("shares over time draws %d bands, want 7", n)
	}
	b.screenshot("feature-targets-wide", 1280)
	b.screenshot("feature-targets-narrow", 390)

	// The dark theme follows the system's.
	b.do(func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		})
		return chromedp.Void{}, err
	})
	if bg := evaluate[string](b, `getComputedStyle(document.body.parentElement).backgroundColor`); bg != "rgb(24, 24, 27)" {
		t.Errorf("dark theme background = %s, want rgb(24, 24, 27)", bg)
	}
	b.screenshot("feature-dark-wide", 1280)
	b.screenshot("feature-dark-narrow", 390)
	b.checkConsole()
}

// TestBrowserAuditLog: changes by two actors on two features, one with a
// comment; the audit log lists them newest first and its filters by
// feature and by actor keep only theirs. Then a feature created with
// percentages, and the kill switch toggled from the list with a
// confirmation that says what users will get.
func TestBrowserAuditLog(t *testing.T) {
	b := startBrowser(t)
	b.app.seed(t)
	ctx := context.Background()
	seven := 7
	if _, err := b.app.svc.Change(ctx, "checkout", change.UpdateBucket("A", &seven, nil), rollout.ChangeOptions{Actor: "carol", Comment: "A was too small"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.app.svc.Change(ctx, "dark-mode", change.UpdateBucket("on", &seven, nil), rollout.ChangeOptions{Actor: "dave"}); err != nil {
		t.Fatal(err)
	}
	entries := func() []string {
		return evaluate[[]string](b, `[...document.querySelectorAll('li.change-entry')].map(li => li.dataset.feature + ' v' + li.dataset.version + ' ' + li.dataset.actor)`)
	}
	b.do(chromedp.Navigate(b.base+"/ui/changes"), waitFor("li.change-entry"))
	if got, want := fmt.Sprint(entries()), "[dark-mode v2 dave checkout v3 carol dark-mode v1 anonymous checkout v2 anonymous checkout v1 anonymous]"; got != want {
		t.Errorf("audit log = %s, want %s", got, want)
	}
	if got := b.text(`li.change-entry[data-actor="carol"] .comment`); got != "Comment: A was too small" {
		t.Errorf("carol's comment = %q", got)
	}
	b.screenshot("audit-wide", 1280)
	b.screenshot("audit-narrow", 390)

	// Filter by feature, then by actor too, with the form.
	b.do(chromedp.SetValue(chromedp.CSS("#changes-feature"), "checkout"), chromedp.Click(chromedp.CSS(".filter-changes button[type=submit]")),
		waitFor(".clear-filter"))
	if got, want := fmt.Sprint(entries()), "[checkout v3 carol checkout v2 anonymous checkout v1 anonymous]"; got != want {
		t.Errorf("audit log of checkout = %s, want %s", got, want)
	}
	b.do(fill("#changes-actor", "carol"), chromedp.Click(chromedp.CSS(".filter-changes button[type=submit]")))
	b.do(waitFor(`#changes-actor[value="carol"]`)) // the page that answers the filter
	if got, want := fmt.Sprint(entries()), "[checkout v3 carol]"; got != want {
		t.Errorf("audit log of checkout by carol = %s, want %s", got, want)
	}
	b.do(fill("#changes-actor", "nobody"), chromedp.Click(chromedp.CSS(".filter-changes button[type=submit]")), waitFor("#no-changes"))

	// Create a feature with percentages.
	b.do(chromedp.Navigate(b.base+"/ui/#create"), waitFor("#new-key"))
	b.do(fill("#new-key", "pricing"),
		fill(`#bucket-rows .bucket-row:nth-child(1) input[name=bucket-name]`, "old"),
		fill(`#bucket-rows .bucket-row:nth-child(1) input[name=bucket-share]`, "75"),
		fill(`#bucket-rows .bucket-row:nth-child(2) input[name=bucket-name]`, "new"),
		fill(`#bucket-rows .bucket-row:nth-child(2) input[name=bucket-share]`, "25"),
		chromedp.Click(chromedp.CSS(`#create-form button[type=submit]`)), waitFor("#create-form .preview .apply"),
		chromedp.Click(chromedp.CSS("#create-form .preview .apply")), waitFor(`#banner[data-version="1"]`))
	var f apiFeature
	b.api("/api/features/pricing", &f)
	if math.Abs(f.Shares["new"]-0.25) > 0.005 || math.Abs(f.Shares["old"]-0.75) > 0.005 {
		t.Errorf("pricing created with 75 %% / 25 %% has shares %v", f.Shares)
	}

	// The kill switch from the list: the confirmation says what users get.
	b.do(chromedp.Navigate(b.base+"/ui/"), waitFor(`form.list-toggle[data-key="dark-mode"]`))
	toggle := `form.list-toggle[data-key="dark-mode"] `
	b.do(chromedp.Click(chromedp.CSS(toggle+"button[type=submit]")), waitFor(toggle+".preview .apply"))
	if got := b.text(toggle + ".preview .confirm-what"); got != "After this: No user gets a bucket: apps serve their default, until it is turned on again." {
		t.Errorf("kill switch confirmation = %q", got)
	}
	if got := b.text(toggle + ".preview .apply"); got != "Turn it off" {
		t.Errorf("kill switch button = %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(toggle+".preview .apply")), waitFor(`#banner[data-version="3"]`))
	if _, err := b.app.svc.Evaluate("dark-mode", "user:1"); err != nil {
		t.Fatal(err)
	}
	if e, _ := b.app.svc.Evaluate("dark-mode", "user:1"); e.Bucket != "" {
		t.Errorf("after the kill switch, user:1 gets %q, want no bucket", e.Bucket)
	}
	b.do(chromedp.Navigate(b.base+"/ui/"), waitFor(`tr[data-key="dark-mode"] .no-bucket`))
	b.screenshot("list-off-wide", 1280)
	b.screenshot("list-off-narrow", 390)
	b.checkConsole()
}

// TestBrowserViewer: signed in with a viewer's token, the feature page has
// no change form and says why, the list has no kill switch, and the header
// says who is signed in; the sign-in page offers no "Sign out".
func TestBrowserViewer(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tokens, err := auth.NewTokens(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := tokens.Create(ctx, "vera", auth.RoleViewer, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	access := api.NewAuth(tokens, nil)
	e := api.New(svc, api.Options{Auth: access, Plans: testPlanLimits, Routes: web.Routes(svc, web.Options{Sessions: access})})
	a := &app{e: e, svc: svc, db: db}
	a.seed(t)
	if _, err := svc.CreateRamp(ctx, "checkout", ramp.Spec{Bucket: "A", Shares: []float64{0.3, 0.4}, Every: time.Hour}, "ed"); err != nil {
		t.Fatal(err)
	}
	b := startBrowserOn(t, a)

	b.do(chromedp.Navigate(b.base+"/ui/login"), waitFor("#token"))
	if n := evaluate[int](b, `document.querySelectorAll('form.signout').length`); n != 0 {
		t.Error("the sign-in page offers to sign out")
	}
	b.do(fill("#token", secret), chromedp.Submit(chromedp.CSS("#token")), waitFor("#who"))
	if got := b.text(".who"); got != "Signed in as vera (viewer)" {
		t.Errorf("header = %q", got)
	}
	if n := evaluate[int](b, `document.querySelectorAll('form[data-kind]').length`); n != 0 {
		t.Errorf("a viewer's list has %d change forms", n)
	}
	b.do(chromedp.Navigate(b.base+"/ui/features/checkout"), waitFor("#read-only"))
	if n := evaluate[int](b, `document.querySelectorAll('form[data-kind]').length`); n != 0 {
		t.Errorf("a viewer's feature page has %d change forms", n)
	}
	if got := b.text("#read-only"); !strings.Contains(got, "vera, a viewer: you can read this feature but not change it") {
		t.Errorf("read-only line = %q", got)
	}
	// The ramp's schedule is there to read; starting, pausing or canceling
	// one is not.
	if got := b.text(`li.ramp .ramp-state`); got != "Active" {
		t.Errorf("a viewer sees the ramp as %q", got)
	}
	if n := evaluate[int](b, `document.querySelectorAll('form[data-ramp], .ramp-actions, button[data-ramp-action]').length`); n != 0 {
		t.Errorf("a viewer's feature page has %d ramp forms or buttons", n)
	}
	b.screenshot("viewer-wide", 1280)
	b.screenshot("viewer-narrow", 390)
	b.checkConsole()
}

// TestBrowserHousekeeping: edit the description with a comment, reshuffle
// behind its warning, refuse a change over its churn limit, and delete only
// once the key is typed.
func TestBrowserHousekeeping(t *testing.T) {
	b := startBrowser(t)
	b.app.seed(t)
	b.do(chromedp.Navigate(b.base+"/ui/features/checkout"), waitFor("#feature-key"))

	b.do(unfold("describe"), fill("#describe-text", "Checkout, second try"), fill("#describe-comment", "clearer name"))
	if got := b.change("describe", chromedp.Steps(), "No user would change bucket", 3); got != "No user changed bucket" {
		t.Errorf("description banner = %q", got)
	}
	if got := b.text(".feature-head .desc"); got != "Checkout, second try" {
		t.Errorf("description = %q", got)
	}
	if got := b.text(`#history li[data-version="3"] .comment`); got != "Comment: clearer name" {
		t.Errorf("history's comment = %q", got)
	}

	// A churn limit below the reshuffle's expected churn refuses it.
	form := `form[data-kind=reshuffle] `
	b.do(unfold("reshuffle"))
	if got := b.text(form + ".warning"); !strings.HasPrefix(got, "Everyone is re-hashed") {
		t.Errorf("reshuffle warning = %q", got)
	}
	b.do(fill("#reshuffle-max-churn", "1"), chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".error"))
	if got := b.text(form + ".error"); !strings.Contains(got, "more than your churn limit of 1.0000%") || strings.Contains(got, "409") {
		t.Errorf("reshuffle over its churn limit = %q", got)
	}
	b.do(fill("#reshuffle-max-churn", ""), chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"))
	if got := b.text(form + ".preview .outcome"); !strings.Contains(got, "of users expected to move (new salt)") {
		t.Errorf("reshuffle preview = %q", got)
	}
	b.confirmBig(form)
	b.do(chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="4"]`))

	// Delete: refused until the key is typed.
	form = `form[data-kind=delete] `
	b.do(unfold("delete"), fill("#delete-confirm", "checkou"), chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".error"))
	if got := b.text(form + ".error"); got != "Type the feature's key, checkout, to confirm." {
		t.Errorf("delete without the key = %q", got)
	}
	b.do(fill("#delete-confirm", "checkout"), chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"))
	if got := b.text(form + ".preview .apply"); got != "Archive checkout" {
		t.Errorf("delete button = %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`tr[data-key="dark-mode"]`))
	if _, ok := b.app.svc.Snapshot().Feature("checkout"); ok {
		t.Error("checkout still exists after deleting it")
	}
	b.checkConsole()
}
