package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// chromiumPath is Debian's headless-capable Chromium, which CI installs.
const chromiumPath = "/usr/bin/chromium"

// browser is a headless Chromium tab on the dashboard of a running server.
type browser struct {
	t         *testing.T
	ctx       context.Context
	tab       context.Context // the tab's, without ctx's deadline
	app       *app
	base      string // the server's URL
	artifacts string

	mu       sync.Mutex
	problems []string // script errors and refused content, from the console
}

// startBrowser serves the API and the dashboard on 127.0.0.1:0 over a
// temporary SQLite database, and opens a tab on it. Without Chromium the test
// is skipped, unless CI=true: CI must run it.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	return startBrowserOn(t, nil)
}

// startBrowserOn is startBrowser on the app a; nil: a new one.
func startBrowserOn(t *testing.T, a *app) *browser {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: a browser test takes seconds")
	}
	if _, err := exec.LookPath(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Chromium is required in CI: %v (apt-get install chromium)", err)
		}
		t.Skipf("no Chromium: %v", err)
	}
	if a == nil {
		a = newApp(t, 0)
	}
	srv := httptest.NewServer(a.e)
	t.Cleanup(srv.Close)
	return startBrowserAt(t, a, srv.URL)
}

// startBrowserAt opens a tab on the app a served at base.
func startBrowserAt(t *testing.T, a *app, base string) *browser {
	t.Helper()
	exe, err := exec.LookPath(chromiumPath)
	if err != nil {
		t.Skipf("no Chromium: %v", err)
	}

	dir := os.Getenv("ROLLOUT_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	t.Cleanup(cancelAlloc)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelTab)

	b := &browser{t: t, app: a, base: base, artifacts: dir, tab: tabCtx}
	// The first Run starts the browser, which lives as long as tabCtx.
	if err := chromedp.Do(tabCtx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, cdplog.Enable, cdp.Empty{})
		return err
	})); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	if err := chromedp.Listen(tabCtx, b.listen); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(tabCtx, 90*time.Second)
	t.Cleanup(cancel)
	b.ctx = ctx
	return b
}

// allow gives the test's browsing d from now instead of the 90 seconds
// it starts with: for a test that visits many pages.
func (b *browser) allow(d time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.tab, d)
	b.t.Cleanup(cancel)
	b.ctx = ctx
}

// listen keeps what the console reports that a working page never says:
// exceptions, and errors other than the failed requests the API answers.
func (b *browser) listen(ev any) {
	var problem string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		problem = "exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			problem += " " + ev.ExceptionDetails.Exception.Description
		}
	case *cdplog.EventEntryAdded:
		if ev.Entry.Level == cdplog.EntryLevelError && ev.Entry.Source != cdplog.EntrySourceNetwork {
			problem = string(ev.Entry.Source) + ": " + ev.Entry.Text
		}
	}
	if problem != "" {
		b.mu.Lock()
		b.problems = append(b.problems, problem)
		b.mu.Unlock()
	}
}

func (b *browser) checkConsole() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("browser console: %s", p)
	}
	b.problems = nil
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.Join(strings.Fields(s), " ")
}

func evaluate[T any](b *browser, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// fill types value into the field, as a user would after clearing it.
func fill(sel, value string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(sel)
	clear := chromedp.Evaluate[bool](`(e => { e.value = ''; return true })(document.querySelector(` + string(q) + `))`)
	return chromedp.Steps(
		chromedp.WaitVisible(chromedp.CSS(sel)),
		func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
			_, err := clear(ctx, t)
			return chromedp.Void{}, err
		},
		chromedp.SendKeys(chromedp.CSS(sel), value),
	)
}

// waitFor waits until the page has the element, across navigations.
func waitFor(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}

// screenshot saves the whole page at width as a PNG artifact.
func (b *browser) screenshot(name string, width int64) {
	b.t.Helper()
	b.do(chromedp.EmulateViewport(width, 900))
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.artifacts, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
	b.do(chromedp.EmulateViewport(1280, 900))
}

// api reads a JSON answer of the server's API.
func (b *browser) api(path string, v any) {
	b.t.Helper()
	res, err := http.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.t.Fatalf("GET %s = %d", path, res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
}

type apiFeature struct {
	Version int                `json:"version"`
	Shares  map[string]float64 `json:"shares"`
}

type apiUser struct {
	Versions []struct {
		Version int     `json:"version"`
		Bucket  *string `json:"bucket"`
	} `json:"versions"`
}

// checkShares compares the exact shares the feature page shows with the
// API's.
func (b *browser) checkShares(want map[string]float64) {
	b.t.Helper()
	var f apiFeature
	b.api("/api/features/checkout", &f)
	if len(f.Shares) != len(want) {
		b.t.Errorf("the API has shares %v, want buckets %v", f.Shares, want)
	}
	shown := evaluate[map[string]string](b, `Object.fromEntries([...document.querySelectorAll('td[data-share]')].map(td => [td.dataset.share, td.textContent.trim() + ' exactly ' + td.dataset.exact]))`)
	if len(shown) != len(f.Shares) {
		b.t.Errorf("the page shows shares %v, the API %v", shown, f.Shares)
	}
	for bucket, share := range f.Shares {
		// A tenth of a point as people read it, and exactly beside it.
		if got, api := shown[bucket], fmt.Sprintf("%.1f%% exactly %.5f%%", 100*share, 100*share); got != api {
			b.t.Errorf("share of %s: page shows %q, API says %s", bucket, got, api)
		}
		if w, ok := want[bucket]; !ok || fmt.Sprintf("%.4f", w) != fmt.Sprintf("%.4f", share) {
			b.t.Errorf("share of %s is %v, want %v", bucket, share, w)
		}
	}
}

// shareShown is the share of bucket in the feature page's buckets table:
// to a tenth of a point, and exactly ("6.4% exactly 6.40137%"), as
// shareWant says the API's.
func (b *browser) shareShown(bucket string) string {
	b.t.Helper()
	q, _ := json.Marshal(fmt.Sprintf("td[data-share=%q]", bucket))
	return b.text(fmt.Sprintf("td[data-share=%q]", bucket)) + " exactly " + evaluate[string](b, `document.querySelector(`+string(q)+`).dataset.exact`)
}

// shareWant is a share as shareShown reads it.
func shareWant(share float64) string {
	return fmt.Sprintf("%.1f%% exactly %.5f%%", 100*share, 100*share)
}

// lookUp looks user up on the feature page and returns the bucket it shows
// at each version, newest first.
func (b *browser) lookUp(user string) []string {
	b.t.Helper()
	evaluate[bool](b, `document.getElementById('lookup-result')?.remove(); true`)
	b.do(fill("#lookup-user", user), chromedp.Click(chromedp.CSS(`form.lookup button[type=submit]`)))
	b.do(waitFor(fmt.Sprintf(`#lookup-result[data-user=%q]`, user)))
	return evaluate[[]string](b, `[...document.querySelectorAll('#lookup-result tr[data-version]')].map(tr => tr.dataset.version + ':' + tr.querySelector('.user-bucket b').textContent)`)
}

// TestBrowser drives the dashboard in headless Chromium the way a product
// manager would: create a feature, grow it through the preview, read its
// churn, look a user up, and roll back. It saves screenshots of the pages, wide
// and narrow, into $ROLLOUT_ARTIFACTS (a temporary directory when unset).
func TestBrowser(t *testing.T) {
	b := startBrowser(t)

	// The empty list invites a first feature.
	b.do(chromedp.Navigate(b.base + "/"))
	b.do(waitFor("#empty-h"))
	if got := b.text("#empty-h"); got != "No features yet — create one" {
		t.Errorf("empty state heading = %q", got)
	}
	b.screenshot("list-empty-narrow", 375)

	// Create checkout with A, B, C (3 replicas each) and an empty salt,
	// both under Advanced: the form takes percentages otherwise.
	if n := evaluate[int](b, `[...document.querySelectorAll('#create-form input[name=bucket-replicas], #new-salt-default')].filter(e => e.checkVisibility()).length`); n != 0 {
		t.Errorf("%d replica or salt fields show before Advanced is opened", n)
	}
	b.do(
		fill("#new-key", "checkout"),
		fill("#new-description", "New checkout flow"),
		chromedp.Click(chromedp.CSS("#create-advanced summary")),
		chromedp.Click(chromedp.CSS("#new-salt-default")),
		waitFor("#new-salt"),
		chromedp.Click(chromedp.CSS("#new-by-replicas")),
		chromedp.Click(chromedp.CSS("#add-row")),
	)
	for i, name := range []string{"A", "B", "C"} {
		row := fmt.Sprintf("#bucket-rows .bucket-row:nth-of-type(%d) ", i+1)
		b.do(fill(row+"[name=bucket-name]", name), fill(row+"[name=bucket-replicas]", "3"))
	}
	if n := evaluate[int](b, `[...document.querySelectorAll('#create-form input[name=bucket-share]')].filter(e => e.checkVisibility()).length`); n != 0 {
		t.Errorf("%d share fields show beside replica counts", n)
	}
	b.screenshot("create-advanced-wide", 1280)
	b.screenshot("create-advanced-narrow", 390)
	b.do(chromedp.Click(chromedp.CSS("#create-form button[type=submit]")), waitFor("#create-form .preview .apply"))
	preview := b.text("#create-form .preview")
	for _, want := range []string{"Every user will get a bucket", "8.25%", "64.78%", "26.97%"} {
		if !strings.Contains(preview, want) {
			t.Errorf("create preview %q lacks %q", preview, want)
		}
	}
	b.do(chromedp.Click(chromedp.CSS("#create-form .preview .apply")), waitFor(`#banner[data-version="1"]`))
	if got := b.text("#banner h2"); got != "Every user now gets a bucket" {
		t.Errorf("banner after creation = %q", got)
	}
	v1 := map[string]float64{"A": 0.0825, "B": 0.6478, "C": 0.2697}
	b.checkShares(v1)
	var created struct {
		Salt string `json:"salt"`
	}
	b.api("/api/features/checkout", &created)
	if created.Salt != "" {
		t.Errorf("salt = %q, want empty", created.Salt)
	}

	// Add D: the preview shows the churn, and nothing changes until applied.
	// Replica counts are under Advanced, folded.
	if open := evaluate[bool](b, `document.getElementById('replica-forms').open`); open {
		t.Error("the replica forms are not folded under Advanced")
	}
	b.do(
		unfold("add-bucket"),
		fill("#add-name", "D"),
		fill("#add-replicas", "3"),
		chromedp.Click(chromedp.CSS(`form[data-kind=add-bucket] button[type=submit]`)),
		waitFor(`form[data-kind=add-bucket] .preview .apply`),
	)
	preview = b.text(`form[data-kind=add-bucket] .preview`)
	for _, want := range []string{"22.27% of users would move, all into D", "Naive hash mod N would move 75.00%", "B → D 11.51%", "22.27%"} {
		if !strings.Contains(preview, want) {
			t.Errorf("add D preview %q lacks %q", preview, want)
		}
	}
	b.screenshot("feature-preview-narrow", 375)
	var f apiFeature
	if b.api("/api/features/checkout", &f); f.Version != 1 {
		t.Fatalf("after the preview the feature is at version %d, want 1: a preview must change nothing", f.Version)
	}
	b.do(chromedp.Click(chromedp.CSS(`form[data-kind=add-bucket] .preview .apply`)), waitFor(`#banner[data-version="2"]`))

	// The churn is the first thing on the page, and in focus.
	if got, want := b.text("#banner h2"), "22.27% of users moved, all into D"; got != want {
		t.Errorf("banner = %q, want %q", got, want)
	}
	type place struct {
		First, Focused string
		Top            float64
	}
	got := evaluate[place](b, `({first: document.querySelector('main').firstElementChild.id, focused: document.activeElement.id, top: document.getElementById('banner').getBoundingClientRect().top})`)
	if got.First != "banner" || got.Focused != "banner" || got.Top > 100 {
		t.Errorf("main's first element %q, the focused element %q, the banner's top %vpx: want the banner first, focused, at the top", got.First, got.Focused, got.Top)
	}
	b.checkShares(map[string]float64{"A": 0.0640, "B": 0.5327, "C": 0.1806, "D": 0.2227})

	b.screenshot("feature-wide", 1280)
	b.screenshot("feature-narrow", 375)

	// The history lists both versions, newest first.
	if got := evaluate[[]string](b, `[...document.querySelectorAll('#history li[data-version]')].map(li => li.dataset.version)`); !slices.Equal(got, []string{"2", "1"}) {
		t.Errorf("history versions = %v, want [2 1]", got)
	}
	if got := b.text(`#history li[data-version="2"] .churn-line`); !strings.HasPrefix(got, "22.27% of users moved, all into D") {
		t.Errorf("history of version 2 = %q", got)
	}

	// An API refusal appears next to the form that caused it.
	b.do(
		unfold("add-bucket"),
		fill("#add-name", "A"),
		chromedp.Click(chromedp.CSS(`form[data-kind=add-bucket] button[type=submit]`)),
		waitFor(`form[data-kind=add-bucket] .error`),
	)
	if got := b.text(`form[data-kind=add-bucket] .error`); !strings.HasPrefix(got, `Bucket "A" already exists`) || strings.Contains(got, "409") || strings.Contains(got, "conflict") || strings.Contains(got, "Not done") {
		t.Errorf("error next to the add form = %q, want the message in words, without HTTP codes", got)
	}
	// Editing the form clears the stale error.
	b.do(chromedp.SendKeys(chromedp.CSS("#add-name"), "2"))
	if hidden := evaluate[bool](b, `document.querySelector('form[data-kind=add-bucket] .error').hidden`); !hidden {
		t.Error("the add form's error stays after the form changed")
	}

	// A user who moved into D: the look-up shows their bucket per version.
	var user string
	var history apiUser
	for i := 0; user == ""; i++ {
		u := fmt.Sprintf("user:%d", i)
		b.api("/api/features/checkout/users/"+url.PathEscape(u), &history)
		if *history.Versions[0].Bucket == "D" {
			user = u
		}
	}
	was := *history.Versions[1].Bucket
	if got, want := b.lookUp(user), []string{"2:D", "1:" + was}; !slices.Equal(got, want) {
		t.Errorf("look-up of %s = %v, want %v", user, got, want)
	}

	// Roll back to version 1: the preview says everyone in D goes back, and
	// after it the shares are version 1's.
	b.do(
		openAt("form[data-kind=rollback]"),
		chromedp.SetValue(chromedp.CSS("#rollback-version"), "1"),
		chromedp.Click(chromedp.CSS(`form[data-kind=rollback] button[type=submit]`)),
		waitFor(`form[data-kind=rollback] .preview .apply`),
	)
	if got := b.text(`form[data-kind=rollback] .preview .outcome`); got != "22.27% of users would move, all out of D" {
		t.Errorf("rollback preview = %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(`form[data-kind=rollback] .preview .apply`)), waitFor(`#banner[data-version="3"]`))
	if got := b.text("#banner h2"); got != "22.27% of users moved, all out of D" {
		t.Errorf("banner after rollback = %q", got)
	}
	b.checkShares(v1)
	if got, want := b.lookUp(user), []string{"3:" + was, "2:D", "1:" + was}; !slices.Equal(got, want) {
		t.Errorf("look-up of %s after rollback = %v, want %v", user, got, want)
	}
	if got := evaluate[[]string](b, `[...document.querySelectorAll('#history li[data-version]')].map(li => li.dataset.version)`); !slices.Equal(got, []string{"3", "2", "1"}) {
		t.Errorf("history versions after rollback = %v, want [3 2 1]", got)
	}

	// The list shows the feature, its shares and its last change.
	b.do(chromedp.Navigate(b.base+"/ui/"), waitFor(`tr[data-key="checkout"]`))
	if got := b.text(`tr[data-key="checkout"] .last-cell`); !strings.HasSuffix(got, " ago 22.27% moved") && got != "just now 22.27% moved" {
		t.Errorf("last change on the list = %q", got)
	}
	if got := evaluate[string](b, `document.querySelector('tr[data-key="checkout"] .last-cell time').title`); !strings.Contains(got, "v3: Rolled back to version 1; ") || !strings.HasSuffix(got, "22.27 % of users moved: 11.51 % into B, 8.91 % into C, 1.85 % into A") {
		t.Errorf("the last change's title on the list = %q", got)
	}
	b.screenshot("list-wide", 1280)
	b.screenshot("list-narrow", 375)
	b.do(chromedp.SendKeys(chromedp.CSS("#filter"), "zzz"), waitFor("#no-match"))

	b.checkConsole()
}

// unfold opens the folded part of the page that holds the change form of
// kind, as a user would: by clicking its summary.
func unfold(kind string) chromedp.Action[chromedp.Void] {
	return openAt(fmt.Sprintf("form[data-kind=%q]", kind))
}

// openAt opens every folded part (<details>) around the element sel, the
// outermost first, as a user would: by clicking each summary. The element
// must be on the page.
func openAt(sel string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(sel)
	open := chromedp.Evaluate[bool](`(e => {
		if (!e) throw new Error('no ' + ` + string(q) + ` + ' on the page');
		const folds = [];
		for (let d = e.tagName === 'DETAILS' ? e : e.closest('details'); d; d = d.parentElement.closest('details')) folds.unshift(d);
		for (const d of folds) if (!d.open) d.querySelector(':scope > summary').click();
		return true;
	})(document.querySelector(` + string(q) + `))`)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := open(ctx, t)
		return chromedp.Void{}, err
	}
}

// change fills a change form's preview, checks what it says, applies it and
// returns the banner's headline on the page that follows.
func (b *browser) change(kind string, fillForm chromedp.Action[chromedp.Void], wantPreview string, version int) string {
	b.t.Helper()
	form := fmt.Sprintf("form[data-kind=%q] ", kind)
	b.do(unfold(kind), fillForm, chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"))
	if got := b.text(form + ".preview .outcome"); got != wantPreview {
		b.t.Errorf("%s preview = %q, want %q", kind, got, wantPreview)
	}
	b.confirmBig(form)
	b.do(chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(fmt.Sprintf(`#banner[data-version="%d"]`, version)))
	return b.text("#banner h2")
}

// TestBrowserChanges drives every other change form through its preview:
// change and remove a bucket, pin and release a user, the kill switch, and a
// refusal because someone else changed the feature meanwhile.
func TestBrowserChanges(t *testing.T) {
	b := startBrowser(t)
	b.app.seed(t)
	b.do(chromedp.Navigate(b.base+"/ui/features/checkout"), waitFor("#feature-key"))

	// Nothing to change: the form says so, and nothing is sent.
	b.do(unfold("update-bucket"), chromedp.Click(chromedp.CSS(`form[data-kind=update-bucket] button[type=submit]`)), waitFor(`form[data-kind=update-bucket] .error`))
	if got := b.text(`form[data-kind=update-bucket] .error`); got != "Give new replicas, a new value, or both." {
		t.Errorf("empty change = %q", got)
	}

	six, off, on, c := 6, false, true, "C"
	steps := []struct {
		name        string
		kind        string
		fill        chromedp.Action[chromedp.Void]
		change      change.Change // the same change, for its churn; nil when it moves no share of users
		direction   string
		wantPreview string
		wantBanner  string
	}{
		{
			name: "grow A", kind: "update-bucket",
			fill:   chromedp.Steps(chromedp.SetValue(chromedp.CSS("#update-bucket"), "A"), fill("#update-replicas", "6")),
			change: change.UpdateBucket("A", &six, nil), direction: "all into A",
		},
		{
			name: "remove D", kind: "remove-bucket",
			fill:   chromedp.SetValue(chromedp.CSS("#remove-bucket"), "D"),
			change: change.RemoveBucket("D"), direction: "all out of D",
		},
		{
			name: "change B's value", kind: "update-bucket",
			fill:        chromedp.Steps(chromedp.SetValue(chromedp.CSS("#update-bucket"), "B"), fill("#update-value", `{"color":"blue"}`)),
			wantPreview: "No user would change bucket", wantBanner: "No user changed bucket",
		},
		{
			name: "pin a user", kind: "set-override",
			fill:        chromedp.Steps(fill("#override-user", "user:0"), chromedp.SetValue(chromedp.CSS("#override-bucket"), "C")),
			wantPreview: "Only 1 overridden user would change bucket", wantBanner: "Only 1 overridden user changed bucket",
		},
		{
			name: "release the user", kind: "clear-override",
			fill:        fill("#clear-user", "user:0"),
			wantPreview: "Only 1 overridden user would change bucket", wantBanner: "Only 1 overridden user changed bucket",
		},
		{
			name: "turn off, serving C", kind: "toggle",
			fill:   chromedp.SetValue(chromedp.CSS("#toggle-fallback"), "C"),
			change: change.Patch(nil, &off, &c), direction: "all into C",
		},
		{
			name: "turn on", kind: "toggle",
			fill:   chromedp.Steps(),
			change: change.Patch(nil, &on, nil), direction: "all out of C",
		},
	}
	version := 2
	for _, s := range steps {
		if s.change.Summary() != "" {
			res, err := b.app.svc.Change(context.Background(), "checkout", s.change, rollout.ChangeOptions{DryRun: true})
			if err != nil {
				t.Fatalf("%s: dry run: %v", s.name, err)
			}
			churn := fmt.Sprintf("%.2f%%", 100*res.Report.Churn)
			s.wantPreview = churn + " of users would move, " + s.direction
			s.wantBanner = churn + " of users moved, " + s.direction
		}
		version++
		if got := b.change(s.kind, s.fill, s.wantPreview, version); got != s.wantBanner {
			t.Errorf("%s: banner = %q, want %q", s.name, got, s.wantBanner)
		}
	}

	page := b.text("main")
	for _, want := range []string{`{"color":"blue"}`, "version 9"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page after the changes lacks %q", want)
		}
	}
	shares, _ := b.app.svc.Snapshot().Shares("checkout")
	b.checkShares(shares)

	// Someone else changes the feature: the page's preview is refused, and
	// says why next to the form.
	if _, err := b.app.svc.Change(context.Background(), "checkout", change.AddBucket(feature.Bucket{Name: "E", Replicas: 3}), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	b.do(unfold("add-bucket"), fill("#add-name", "F"), chromedp.Click(chromedp.CSS(`form[data-kind=add-bucket] button[type=submit]`)), waitFor(`form[data-kind=add-bucket] .error`))
	if got := b.text(`form[data-kind=add-bucket] .error`); !strings.HasPrefix(got, "Someone changed this feature since the page was loaded") || strings.Contains(got, "412") {
		t.Errorf("stale page's error = %q", got)
	}
	// Its Reload button shows the other change.
	b.do(chromedp.Click(chromedp.CSS(`form[data-kind=add-bucket] .error button.reload`)), waitFor(`#history li[data-version="10"]`))
	if got := b.text("#feature-version"); got != "10" {
		t.Errorf("after Reload the page shows version %s, want 10", got)
	}
	// The banner of version 9 is not shown again.
	if n := evaluate[int](b, `document.querySelectorAll('#banner').length`); n != 0 {
		t.Errorf("after Reload the page shows %d banners, want none", n)
	}
	b.checkConsole()
}
