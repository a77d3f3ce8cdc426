package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
	"github.com/rollout/rollout/webhook"
)

// adminApp is the API and dashboard with access control, tokens "ada"
// (admin) and "vera" (viewer), webhooks, and the seeded features; it
// returns the app, its tokens and the secrets by name.
func adminApp(t *testing.T) (*app, *auth.Tokens, map[string]string) {
	t.Helper()
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
	for name, role := range map[string]auth.Role{"ada": auth.RoleAdmin, "vera": auth.RoleViewer, "ed": auth.RoleEditor} {
		_, secret, err := tokens.Create(ctx, name, role, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		secrets[name] = secret
	}
	access := api.NewAuth(tokens, nil)
	hooks := webhook.NewHooks(db, nil)
	e := api.New(svc, api.Options{Auth: access, Plans: testPlanLimits, Webhooks: hooks,
		Routes: web.Routes(svc, web.Options{Sessions: access, Webhooks: hooks})})
	a := &app{e: e, svc: svc, db: db}
	a.seed(t)
	return a, tokens, secrets
}

func (b *browser) signIn(secret string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base+"/ui/login"), waitFor("#token"),
		fill("#token", secret), chromedp.Submit(chromedp.CSS("#token")), waitFor("#who"))
}

// dark switches the page to the dark theme.
func (b *browser) dark() {
	b.do(func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		})
		return chromedp.Void{}, err
	})
}

// wait waits until the JavaScript condition holds.
func wait(cond string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](cond)(ctx, t)
		return chromedp.Void{}, err
	}
}

// status sends a GET with a bearer token and returns the status.
func status(t *testing.T, base, path, secret string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestBrowserTokens: an admin creates a token in the dashboard and sees its
// secret once, which works; the list shows its role, creation and last
// use; revoking it asks first, then the secret stops working. Viewers do
// not see the page or its link.
func TestBrowserTokens(t *testing.T) {
	a, tokens, secrets := adminApp(t)
	b := startBrowserOn(t, a)
	b.signIn(secrets["vera"])
	if n := evaluate[int](b, `document.querySelectorAll('a[href="/ui/admin/tokens"]').length`); n != 0 {
		t.Errorf("a viewer's header links to the tokens page")
	}
	b.do(chromedp.Navigate(b.base + "/ui/admin/tokens"))
	if got := evaluate[int](b, `document.querySelectorAll('#token-form').length`); got != 0 {
		t.Errorf("a viewer got the tokens page")
	}

	b.signIn(secrets["ada"])
	if err := tokens.Refresh(context.Background()); err != nil { // saves the sign-in's use, as serve does each second
		t.Fatal(err)
	}
	b.do(chromedp.Click(chromedp.CSS(`a[href="/ui/admin/tokens"]`)), waitFor(`#tokens-body tr.token[data-name="ada"]`))
	if got := b.text(`#tokens-body tr[data-name="ada"] .last-used`); got == "never" {
		t.Errorf("ada signed in, but the list says she never used her token")
	}
	b.do(fill("#token-name", "ci-bot"), chromedp.SetValue(chromedp.CSS("#token-role"), "editor"),
		chromedp.Click(chromedp.CSS(`#token-form button[type=submit]`)), waitFor("#token-secret-value"),
		waitFor(`#tokens-body tr[data-name="ci-bot"]`))
	secret := b.text("#token-secret-value")
	if !strings.HasPrefix(secret, "rlt_") {
		t.Fatalf("shown secret %q", secret)
	}
	if got := status(t, b.base, "/api/features", secret); got != 200 {
		t.Errorf("the new token's secret: GET /api/features = %d, want 200", got)
	}
	if got := b.text(`#tokens-body tr[data-name="ci-bot"]`); !strings.Contains(got, "editor") || !strings.Contains(got, "by ada") || !strings.Contains(got, "active") {
		t.Errorf("ci-bot's row = %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(`#token-secret .copy`)),
		wait(`document.querySelector('#token-secret .copy').textContent !== 'Copy'`))
	if got := b.text(`#token-secret .copy`); got != "Copied" && !strings.HasPrefix(got, "Selected") {
		t.Errorf("copy button says %q after a click", got)
	}
	b.screenshot("admin-tokens-wide", 1280)
	b.screenshot("admin-tokens-narrow", 390)

	// The secret is not shown again.
	b.do(chromedp.Reload(), waitFor(`#tokens-body tr[data-name="ci-bot"]`))
	if html := evaluate[string](b, `document.body.innerHTML`); strings.Contains(html, secret) {
		t.Errorf("the page shows the secret after a reload")
	}
	// Revoke asks first; cancel keeps it.
	row := `#tokens-body tr[data-name="ci-bot"]`
	b.do(chromedp.Click(chromedp.CSS(row+" button.revoke")), waitFor(row+" .confirm"))
	if got := b.text(row + " .confirm"); !strings.Contains(got, "Revoke ci-bot?") {
		t.Errorf("confirmation = %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(row+" .confirm button.secondary")), waitFor(row+" button.revoke"))
	if got := status(t, b.base, "/api/features", secret); got != 200 {
		t.Errorf("canceled revoke: the secret answers %d", got)
	}
	b.do(chromedp.Click(chromedp.CSS(row+" button.revoke")), waitFor(row+" .confirm-yes"),
		chromedp.Click(chromedp.CSS(row+" .confirm-yes")), waitFor(`#tokens-body tr.revoked[data-name="ci-bot"]`))
	if got := status(t, b.base, "/api/features", secret); got != 401 {
		t.Errorf("revoked token: GET /api/features = %d, want 401", got)
	}
	b.dark()
	b.screenshot("admin-tokens-dark-wide", 1280)
	b.screenshot("admin-tokens-dark-narrow", 390)
	b.checkConsole()
}

// TestBrowserWebhooks: an admin registers a webhook in the dashboard (its
// secret shown once); deliveries to an endpoint that fails back off until
// the webhook pauses; every page then tells the admin, the webhooks page
// says why and shows the delivery log; resume makes it active again and
// delete, confirmed, removes it.
func TestBrowserWebhooks(t *testing.T) {
	a, _, secrets := adminApp(t)
	var mu sync.Mutex
	got := 0
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got++
		mu.Unlock()
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	t.Cleanup(endpoint.Close)
	b := startBrowserOn(t, a)
	b.signIn(secrets["ada"])
	b.do(chromedp.Click(chromedp.CSS(`a[href="/ui/admin/webhooks"]`)), waitFor("#hook-form"),
		fill("#hook-url", endpoint.URL+"/rollout"),
		chromedp.Click(chromedp.CSS(`#hook-form button[type=submit]`)), waitFor("#hook-secret-value"), waitFor("li.hook"))
	if s := b.text("#hook-secret-value"); !strings.HasPrefix(s, "whsec_") {
		t.Errorf("shown secret %q", s)
	}
	if got := b.text("li.hook .state-chip"); got != "Active" {
		t.Errorf("new webhook state %q", got)
	}
	// A bad URL is refused with words.
	b.do(fill("#hook-url", "ftp://example.com/x"), chromedp.Click(chromedp.CSS(`#hook-form button[type=submit]`)), waitFor("#hook-error"))
	if got := b.text("#hook-error"); !strings.Contains(got, "http:// or https://") {
		t.Errorf("error for an ftp URL = %q", got)
	}

	// Deliveries fail until the webhook pauses (a clock the test moves).
	var mc sync.Mutex
	now := time.Now()
	clock := func() time.Time { mc.Lock(); defer mc.Unlock(); return now }
	w := webhook.New(a.db, webhook.Options{Clock: clock})
	for i := 1; i <= webhook.MaxFailures; i++ {
		if n, err := w.RunOnce(context.Background()); n != 1 || err != nil {
			t.Fatalf("attempt %d: %d, %v", i, n, err)
		}
		mc.Lock()
		now = now.Add(webhook.Backoff(i))
		mc.Unlock()
	}
	b.do(chromedp.Navigate(b.base+"/ui/"), waitFor("#paused-hooks-notice"))
	if got := b.text("#paused-hooks-notice"); !strings.Contains(got, "1 webhook paused") {
		t.Errorf("notice = %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS("#paused-hooks-notice a")), waitFor("li.hook-paused"))
	if got := b.text("li.hook .hook-state"); !strings.Contains(got, "Paused") || !strings.Contains(got, "10 failed attempts in a row") || !strings.Contains(got, "502") {
		t.Errorf("paused state = %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS("li.hook button.show-log")), waitFor("li.hook .log-table"))
	if n := evaluate[int](b, `document.querySelectorAll('li.hook .log-table tbody tr.failed').length`); n != webhook.MaxFailures {
		t.Errorf("log shows %d failed attempts, want %d", n, webhook.MaxFailures)
	}
	if got := b.text("li.hook .log-table tbody tr:first-child"); !strings.Contains(got, "502") || !strings.Contains(got, "upstream down") || !strings.Contains(got, "webhook_create") {
		t.Errorf("latest log row = %q", got)
	}
	b.screenshot("admin-webhooks-paused-wide", 1280)
	b.screenshot("admin-webhooks-paused-narrow", 390)
	b.dark()
	b.screenshot("admin-webhooks-dark-wide", 1280)
	b.screenshot("admin-webhooks-dark-narrow", 390)

	b.do(chromedp.Click(chromedp.CSS("li.hook button.resume")), waitFor("li.hook-active"))
	if n := evaluate[int](b, `document.querySelectorAll('#paused-hooks-notice').length`); n != 0 {
		t.Log("the notice stays until the page is loaded again") // it is rendered by the server
	}
	h, err := a.db.Webhooks(context.Background())
	if err != nil || len(h) != 1 || h[0].State != webhook.Active {
		t.Fatalf("after resume: %+v, %v", h, err)
	}
	b.do(chromedp.Click(chromedp.CSS("li.hook button.delete")), waitFor("li.hook .confirm-yes"),
		chromedp.Click(chromedp.CSS("li.hook .confirm-yes")), waitFor("#hooks-list li.hint"))
	if h, _ := a.db.Webhooks(context.Background()); len(h) != 0 {
		t.Errorf("after delete: %d webhooks", len(h))
	}
	b.checkConsole()
}

// TestBrowserArchived: archived features are listed with who archived
// them, when and why, and a Restore button that previews the share of
// users it serves again before it does; an admin purges one after typing its key; a
// viewer sees the list without either button.
func TestBrowserArchived(t *testing.T) {
	ctx := context.Background()
	a, _, secrets := adminApp(t)
	for _, key := range []string{"checkout", "dark-mode"} {
		if _, err := a.svc.Archive(ctx, key, rollout.ChangeOptions{Actor: "ed", Comment: "the " + key + " test ended"}); err != nil {
			t.Fatal(err)
		}
	}
	b := startBrowserOn(t, a)
	b.signIn(secrets["vera"])
	b.do(chromedp.Click(chromedp.CSS(`a[href="/ui/archived"]`)), waitFor(`tr.archived-feature[data-key="checkout"]`))
	if n := evaluate[int](b, `document.querySelectorAll('#archived-body button').length`); n != 0 {
		t.Errorf("a viewer gets %d buttons on the archived features", n)
	}

	b.signIn(secrets["ada"])
	b.do(chromedp.Navigate(b.base+"/ui/archived"), waitFor(`tr.archived-feature[data-key="checkout"] button.restore`))
	if got := b.text(`tr[data-key="checkout"]`); !strings.Contains(got, "B 53.27 %, D 22.27 %") || !strings.Contains(got, "v2") {
		t.Errorf("checkout's row = %q", got)
	}
	// Who archived it, when and why.
	if got := b.text(`tr[data-key="checkout"] td.archived-by`); !strings.HasPrefix(got, "by ed, ") || !strings.Contains(got, "“the checkout test ended”") {
		t.Errorf("checkout's archived cell = %q, want who, when and why", got)
	}
	b.screenshot("archived-wide", 1280)
	b.screenshot("archived-narrow", 390)
	// Restore previews what it does first; Cancel leaves it archived.
	b.do(chromedp.Click(chromedp.CSS(`tr[data-key="checkout"] button.restore`)), waitFor(`tr[data-key="checkout"] .restore-preview`))
	if got := b.text(`tr[data-key="checkout"] .restore-preview`); !strings.Contains(got, "100 % of users would get a bucket of checkout again") || !strings.Contains(got, "B 53.27 %") {
		t.Errorf("restore preview = %q", got)
	}
	b.screenshot("archived-restore-preview-narrow", 390)
	b.do(chromedp.Click(chromedp.CSS(`tr[data-key="checkout"] .restore-preview button.secondary`)), waitFor(`tr[data-key="checkout"] button.restore`))
	if _, ok := a.svc.Snapshot().Feature("checkout"); ok {
		t.Fatal("checkout is served after a canceled restore")
	}
	b.do(chromedp.Click(chromedp.CSS(`tr[data-key="checkout"] button.restore`)), waitFor(`tr[data-key="checkout"] .confirm-restore`),
		chromedp.Click(chromedp.CSS(`tr[data-key="checkout"] .confirm-restore`)), waitFor("#archived-done"))
	if got := b.text("#archived-done"); got != "checkout is served again, as version 3." {
		t.Errorf("after restore: %q", got)
	}
	if _, ok := a.svc.Snapshot().Feature("checkout"); !ok {
		t.Errorf("checkout is not served after restore")
	}
	// Purge asks for the key, typed.
	row := `tr[data-key="dark-mode"]`
	b.do(chromedp.Click(chromedp.CSS(row+" button.purge")), waitFor(row+" .purge-key"), fill(row+" .purge-key", "dark-mod"))
	if !evaluate[bool](b, `document.querySelector('tr[data-key="dark-mode"] .confirm-purge').disabled`) {
		t.Errorf("purge is enabled before the key is typed in full")
	}
	b.screenshot("archived-purge-narrow", 390)
	b.dark()
	b.screenshot("archived-purge-dark-wide", 1280)
	b.do(fill(row+" .purge-key", "dark-mode"), chromedp.Click(chromedp.CSS(row+" .confirm-purge")), waitFor("#archived-done"))
	if got := b.text("#archived-done"); got != "dark-mode was purged; its key is free again." {
		t.Errorf("after purge: %q", got)
	}
	if fs, err := a.svc.ArchivedFeatures(ctx); err != nil || len(fs) != 0 {
		t.Errorf("archived after restore and purge: %v, %v", fs, err)
	}
	b.do(waitFor("#archived-body td.empty"))
	if got := b.text("#archived-body"); got != "No archived feature." {
		t.Errorf("list after all = %q", got)
	}
	b.checkConsole()
}
