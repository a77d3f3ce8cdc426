package web_test

import (
	"context"
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
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/request"
	"github.com/rollout/rollout/rollout/settings"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

// TestBrowserRequests: approvals on for checkout; an editor's changes wait
// as requests, shown on the feature page and the requests page with their
// preview in percentages; their author may only cancel; another editor
// approves one (it applies) and rejects the other, with comments; an admin
// changes the settings on the settings page.
func TestBrowserRequests(t *testing.T) {
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
	secrets := map[string]string{}
	for name, role := range map[string]auth.Role{"ed": auth.RoleEditor, "carol": auth.RoleEditor, "ada": auth.RoleAdmin} {
		_, secret, err := tokens.Create(ctx, name, role, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		secrets[name] = secret
	}
	access := api.NewAuth(tokens, nil)
	e := api.New(svc, api.Options{Auth: access, Plans: testPlanLimits, Routes: web.Routes(svc, web.Options{Sessions: access})})
	a := &app{e: e, svc: svc, db: db}
	a.seed(t)
	if _, err := svc.UpdateSettings(ctx, settings.Settings{MaxChurn: 0.25, RequireApproval: settings.ApprovalPolicy{Features: []string{"checkout"}}}, 0, "ada", "checkout is live"); err != nil {
		t.Fatal(err)
	}
	six := 6
	ed := rollout.ChangeOptions{Actor: "ed", Role: auth.RoleEditor, Comment: "more A"}
	small, err := svc.Change(ctx, "checkout", change.UpdateBucket("A", &six, nil), ed)
	if err != nil || small.Request == nil {
		t.Fatalf("editor's change = %+v, %v; want a request", small, err)
	}
	ed.Comment = "everyone on D"
	big, err := svc.Change(ctx, "checkout", change.SetBuckets([]feature.Bucket{{Name: "A", Replicas: 0}, {Name: "B", Replicas: 0}, {Name: "C", Replicas: 0}, {Name: "D", Replicas: 3}}), ed)
	if err != nil || big.Request == nil {
		t.Fatalf("editor's big change = %+v, %v; want a request", big, err)
	}
	b := startBrowserOn(t, a)
	signIn := func(name string) {
		t.Helper()
		b.do(chromedp.Navigate(b.base+"/ui/login"), waitFor("#token"))
		if n := evaluate[int](b, `document.querySelectorAll('form.signout').length`); n != 0 {
			b.do(chromedp.Submit(chromedp.CSS("form.signout")), waitFor("#token"))
		}
		b.do(fill("#token", secrets[name]), chromedp.Submit(chromedp.CSS("#token")), waitFor("#who"))
	}

	// The author: the feature page says requests wait; the requests page
	// shows them, and offers only to cancel.
	signIn("ed")
	b.do(chromedp.Navigate(b.base+"/ui/features/checkout"), waitFor("#open-requests-notice"))
	if got := b.text("#open-requests-notice"); !strings.Contains(got, "2 change requests waiting for approval") || !strings.Contains(got, "by ed") {
		t.Errorf("feature page notice = %q", got)
	}
	b.do(chromedp.Navigate(b.base+"/ui/requests"), waitFor("#request-"+small.Request.ID))
	if n := evaluate[int](b, `document.querySelectorAll('li.request button.approve').length`); n != 0 {
		t.Errorf("the author is offered %d approve buttons", n)
	}
	bigText := b.text("#request-" + big.Request.ID)
	if !strings.Contains(bigText, "of users would move") || !strings.Contains(bigText, "everyone on D") || !strings.Contains(bigText, "%") {
		t.Errorf("big request reads %q", bigText)
	}
	b.screenshot("requests-author-wide", 1280)
	b.screenshot("requests-author-narrow", 390)

	// A change the editor makes on the feature page becomes a request and
	// opens the requests page; its author cancels it there.
	override := `form[data-kind="set-override"] `
	b.do(chromedp.Navigate(b.base+"/ui/features/checkout"), waitFor("#feature-key"), unfold("set-override"),
		fill("#override-user", "user:7"), chromedp.Click(chromedp.CSS(override+"button[type=submit]")),
		waitFor(override+".preview .apply"))
	if got := b.text(override + ".preview .apply"); got != "Submit for approval" {
		t.Errorf("an editor's apply button under approvals reads %q", got)
	}
	if got := b.text(override + ".preview .needs"); !strings.Contains(got, "will wait as a request") {
		t.Errorf("the preview says %q", got)
	}
	b.screenshot("feature-submit-for-approval-narrow", 390)
	b.do(chromedp.Click(chromedp.CSS(override + ".preview .apply")))
	var pinned request.Request
	b.until("the override's request on the requests page", func() bool {
		open, err := svc.Requests(ctx, request.Query{State: request.Open})
		if err != nil || len(open) != 3 || open[0].Change.Kind != request.SpecSetOverride {
			return false
		}
		pinned = open[0]
		return evaluate[bool](b, `location.pathname === '/ui/requests' && !!document.querySelector('#request-`+pinned.ID+` button[value=cancel]')`)
	})
	b.do(chromedp.Click(chromedp.CSS("#request-"+pinned.ID+" button[value=cancel]")), waitFor("ol.decided #request-"+pinned.ID))
	if got := b.text("ol.decided #request-" + pinned.ID); !strings.Contains(got, "canceled by ed") {
		t.Errorf("canceled request reads %q", got)
	}

	// Another editor approves the small one and rejects the big one.
	signIn("carol")
	b.do(chromedp.Navigate(b.base+"/ui/requests"), waitFor("#request-"+small.Request.ID+" button.approve"))
	b.screenshot("requests-reviewer-wide", 1280)
	b.screenshot("requests-reviewer-narrow", 390)
	b.do(fill("#comment-"+small.Request.ID, "looks right"), chromedp.Click(chromedp.CSS("#request-"+small.Request.ID+" button.approve")))
	b.do(waitFor("ol.decided #request-" + small.Request.ID))
	if got := b.text("ol.decided #request-" + small.Request.ID); !strings.Contains(got, "applied by carol") || !strings.Contains(got, "looks right") {
		t.Errorf("approved request reads %q", got)
	}
	f, _ := svc.Snapshot().Feature("checkout")
	if f.Version != 3 {
		t.Errorf("checkout at version %d after the approval, want 3", f.Version)
	}
	v, err := svc.Version(ctx, "checkout", 3)
	if err != nil || v.Actor != "ed, approved by carol" {
		t.Errorf("version 3 = %q, %v; want made by ed, approved by carol", v.Actor, err)
	}
	b.do(fill("#comment-"+big.Request.ID, "too much at once"), chromedp.Click(chromedp.CSS("#request-"+big.Request.ID+" button.reject")))
	b.do(waitFor("#no-open-requests"))
	if got := b.text("ol.decided #request-" + big.Request.ID); !strings.Contains(got, "rejected by carol") || !strings.Contains(got, "too much at once") {
		t.Errorf("rejected request reads %q", got)
	}
	b.do(chromedp.Navigate(b.base+"/ui/features/checkout"), waitFor("#feature-key"))
	if n := evaluate[int](b, `document.querySelectorAll('#open-requests-notice').length`); n != 0 {
		t.Error("the feature page still says requests wait")
	}
	// An editor sees the settings but cannot change them.
	b.do(chromedp.Navigate(b.base+"/ui/settings"), waitFor("#settings-form"))
	if n := evaluate[int](b, `document.querySelectorAll('#settings-form fieldset:not([disabled])').length`); n != 0 {
		t.Errorf("an editor's settings page has %d enabled fieldsets", n)
	}

	// The admin: the churn limit to 10 %, approvals for every feature.
	signIn("ada")
	b.do(chromedp.Navigate(b.base+"/ui/settings"), waitFor("#settings-form button[type=submit]"))
	if got := evaluate[string](b, `document.querySelector('#max-churn').value`); got != "25" {
		t.Errorf("churn limit field = %q, want 25", got)
	}
	b.screenshot("settings-wide", 1280)
	b.screenshot("settings-narrow", 390)
	b.do(fill("#max-churn", "150"), chromedp.Click(chromedp.CSS("#settings-form button[type=submit]")), waitFor("#settings-form .error"))
	if got := b.text("#settings-form .error"); !strings.Contains(got, "between 0 and 100") {
		t.Errorf("bad limit error = %q", got)
	}
	b.do(fill("#max-churn", "10"), chromedp.Click(chromedp.CSS("#approvals-all")), fill("#settings-comment", "tighter"),
		chromedp.Click(chromedp.CSS("#settings-form button[type=submit]")))
	b.until("the settings saved", func() bool { st, err := svc.Settings(ctx); return err == nil && st.Version == 2 })
	if st, _ := svc.Settings(ctx); st.MaxChurn != 0.1 || !st.RequireApproval.All {
		t.Errorf("saved settings = %+v, want 10 %% and every feature", st)
	}
	// The page reloads itself once saved: wait for that rather than
	// navigate, which the reload would abort.
	b.do(waitFor(`#settings-form[data-version="2"] p.meta`))
	if got := b.text("#settings-form p.meta"); !strings.Contains(got, "Version 2, saved by ada") {
		t.Errorf("settings meta = %q", got)
	}
	b.do(func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		})
		return chromedp.Void{}, err
	})
	b.do(chromedp.Navigate(b.base+"/ui/requests"), waitFor("ol.decided"))
	b.screenshot("requests-dark-wide", 1280)
	b.screenshot("requests-dark-narrow", 390)
	b.checkConsole()
}

// until waits for ok to hold, checking it every 50ms while the test's
// browser context lasts (it fails the test when that ends first).
func (b *browser) until(what string, ok func() bool) {
	b.t.Helper()
	for !ok() {
		select {
		case <-b.ctx.Done():
			b.t.Fatalf("waiting for %s: %v", what, b.ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
