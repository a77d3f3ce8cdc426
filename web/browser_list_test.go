package web_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/ramp"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

// testClock is a clock a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newLiveApp is newApp with the service on clock and following its store,
// as the binary's does, so that streams see its changes.
func newLiveApp(t *testing.T, clock *testClock) *app {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	var now rollout.Clock
	if clock != nil {
		now = clock.Now
	}
	svc, err := rollout.NewService(ctx, db, now)
	if err != nil {
		t.Fatalf("new service: %v", err)
	}
	done := make(chan struct{})
	go func() { defer close(done); svc.Follow(ctx, rollout.FollowOptions{Interval: 50 * time.Millisecond}) }()
	t.Cleanup(func() { cancel(); <-done; db.Close() })
	e := api.New(svc, api.Options{Plans: testPlanLimits, Routes: web.Routes(svc, web.Options{SampleUsers: 1000})})
	return &app{e: e, svc: svc, db: db}
}

// darkMode emulates the system's dark (or light) colour scheme.
func darkMode(dark bool) chromedp.Action[chromedp.Void] {
	scheme := "light"
	if dark {
		scheme = "dark"
	}
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return chromedp.Void{}, err
	}
}

// screenshots saves the page at 1280 and 390 px, light and dark.
func (b *browser) screenshots(name string) {
	b.t.Helper()
	for _, dark := range []bool{false, true} {
		suffix := ""
		if dark {
			suffix = "-dark"
		}
		b.do(darkMode(dark))
		b.screenshot(name+"-wide"+suffix, 1280)
		b.screenshot(name+"-narrow"+suffix, 390)
	}
	b.do(darkMode(false))
}

// visibleRows are the keys of the list's rows a user sees, top to bottom.
func (b *browser) visibleRows() []string {
	b.t.Helper()
	return evaluate[[]string](b, `[...document.querySelectorAll('#features tr.feature-row')].filter(tr => tr.getClientRects().length > 0).map(tr => tr.dataset.key)`)
}

// seedList creates 45 split features of two teams, and one of each status:
// pay-dormant, pay-full, pay-off, pay-quiet (never evaluated) and
// pay-ramp; 40 days later, every feature but pay-full and pay-quiet is
// evaluated, and pay-ramp starts a ramp.
func seedList(t *testing.T, a *app, clock *testClock) {
	t.Helper()
	ctx := context.Background()
	create := func(f feature.Feature) {
		t.Helper()
		defer clock.Add(time.Minute)
		if f.Salt == "" {
			f.Salt = f.Key
		}
		if _, err := a.svc.Create(ctx, f, rollout.ChangeOptions{Actor: "seed"}); err != nil {
			t.Fatalf("create %s: %v", f.Key, err)
		}
	}
	split := []feature.Bucket{{Name: "off", Replicas: 50}, {Name: "on", Replicas: 50}}
	for i := range 45 {
		team, owner := "team-a", "alice@example.com"
		if i%2 == 1 {
			team = "team-b"
		}
		if i >= 10 {
			owner = "bob"
		}
		create(feature.Feature{Key: fmt.Sprintf("feat-%02d", i), Description: fmt.Sprintf("Experiment number %d of the growth team's quarter, with a long description", i),
			Enabled: true, Buckets: split, Tags: []string{team, "q4"}, Owner: owner})
	}
	create(feature.Feature{Key: "pay-dormant", Enabled: true, Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 0}}, Tags: []string{"payments"}})
	create(feature.Feature{Key: "pay-full", Enabled: true, Buckets: []feature.Bucket{{Name: "off", Replicas: 0}, {Name: "on", Replicas: 100}}, Tags: []string{"payments"}, Owner: "carol"})
	create(feature.Feature{Key: "pay-off", Enabled: false, Buckets: split, Tags: []string{"payments"}})
	create(feature.Feature{Key: "pay-quiet", Enabled: true, Buckets: split})
	create(feature.Feature{Key: "pay-ramp", Enabled: true, Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 0}}})

	clock.Add(40 * 24 * time.Hour)
	snap := a.svc.Snapshot()
	for _, key := range snap.Keys() {
		if key != "pay-full" && key != "pay-quiet" {
			if _, err := snap.Evaluate(key, "someone"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.svc.FlushExposures(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.svc.CreateRamp(ctx, "pay-ramp", ramp.Spec{Bucket: "on", Shares: []float64{0.1, 0.5, 1}, Every: 24 * time.Hour, Start: clock.Now().Add(3 * time.Hour)}, "dana"); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserList: the list a product manager runs. 50 features fit in two
// screens at 1280 px, one line each; the filter hides what does not match
// (typing "zzz" leaves no row visible and says so; a real prefix leaves
// its features), tags, owners and statuses filter, the sort orders by
// name or last change, and each feature's chip says its status.
func TestBrowserList(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)}
	a := newLiveApp(t, clock)
	seedList(t, a, clock)
	b := startBrowserOn(t, a)
	b.do(chromedp.Navigate(b.base+"/ui/"), waitFor(`#features`))

	if got := len(b.visibleRows()); got != 50 {
		t.Fatalf("the list shows %d rows, want 50", got)
	}
	// One line a feature: every row as high as the first, and 50 of
	// them in two screens of 900 px.
	heights := evaluate[[]float64](b, `[...document.querySelectorAll('#features tr.feature-row')].map(tr => tr.getBoundingClientRect().height)`)
	table := evaluate[float64](b, `document.getElementById('features').getBoundingClientRect().bottom + scrollY`)
	t.Logf("row heights %v px; the table ends %.0f px down the page", slices.Compact(slices.Sorted(slices.Values(heights))), table)
	if slices.Max(heights) > 1.3*slices.Min(heights) {
		t.Errorf("rows from %.0f to %.0f px high: some take more than one line", slices.Min(heights), slices.Max(heights))
	}
	if table > 2*900 {
		t.Errorf("50 features end %.0f px down the page, more than two screens of 900 px", table)
	}

	// Statuses.
	chips := evaluate[map[string]string](b, `Object.fromEntries([...document.querySelectorAll('#features tr.feature-row')].map(tr => [tr.dataset.key, [...tr.querySelectorAll('.chip')].map(c => c.textContent).join(' + ')]))`)
	for key, want := range map[string]string{
		"feat-00": "Split", "pay-dormant": "Dormant + Stale", "pay-full": "100 % + Stale", "pay-off": "Off",
		"pay-quiet": "Split + Stale", "pay-ramp": "Ramping → 10 % in 3 h",
	} {
		if chips[key] != want {
			t.Errorf("chips of %s = %q, want %q", key, chips[key], want)
		}
	}
	if got := b.text(`tr[data-key="pay-quiet"] .chip.stale`); got != "Stale" {
		t.Errorf("pay-quiet's stale chip = %q", got)
	}
	if got := evaluate[string](b, `document.querySelector('tr[data-key="pay-quiet"] .chip.stale').title`); got != "Never evaluated by apps in the 40 days since it was created." {
		t.Errorf("why pay-quiet is stale: %q", got)
	}

	// Sorted by last change, newest first: the ramp's feature was created
	// last of all.
	if rows := b.visibleRows(); rows[0] != "pay-ramp" || rows[49] != "feat-00" {
		t.Errorf("by last change the rows run %s … %s, want pay-ramp … feat-00", rows[0], rows[49])
	}

	// The filter: nothing, then a prefix.
	b.do(fill("#filter", "zzz"))
	if rows := b.visibleRows(); len(rows) != 0 {
		t.Errorf("after typing zzz the list shows %d rows: %v", len(rows), rows)
	}
	if got := b.text("#no-match"); got != "No feature matches these filters." {
		t.Errorf("the empty message = %q", got)
	}
	b.screenshots("list-none")
	b.do(fill("#filter", "pay-"))
	if rows := b.visibleRows(); len(rows) != 5 {
		t.Errorf("after typing pay- the list shows %v, want the 5 pay- features", rows)
	}
	if evaluate[bool](b, `document.getElementById('no-match').getClientRects().length > 0`) {
		t.Error("the empty message shows beside matching rows")
	}
	if got := evaluate[string](b, `location.search`); got != "?q=pay-" {
		t.Errorf("the URL's query = %q, want ?q=pay-", got)
	}

	// Status, tag and owner.
	b.do(fill("#filter", ""), chromedp.SetValue(chromedp.CSS("#filter-status"), "stale"))
	evaluate[bool](b, `document.getElementById('filter-status').dispatchEvent(new Event('change')), true`)
	if rows := b.visibleRows(); !slices.Equal(slices.Sorted(slices.Values(rows)), []string{"pay-dormant", "pay-full", "pay-quiet"}) {
		t.Errorf("stale features: %v, want pay-dormant, pay-full, pay-quiet", rows)
	}
	b.do(chromedp.SetValue(chromedp.CSS("#filter-status"), ""))
	evaluate[bool](b, `document.getElementById('filter-status').dispatchEvent(new Event('change')), true`)
	b.do(chromedp.Click(chromedp.CSS(`tr[data-key="feat-01"] a.tag[data-tag="team-b"]`)))
	if rows := b.visibleRows(); len(rows) != 22 {
		t.Errorf("tag team-b shows %d rows, want 22", len(rows))
	}
	b.do(chromedp.SetValue(chromedp.CSS("#filter-owner"), "alice@example.com"))
	evaluate[bool](b, `document.getElementById('filter-owner').dispatchEvent(new Event('change')), true`)
	if rows := b.visibleRows(); !slices.Equal(rows, []string{"feat-09", "feat-07", "feat-05", "feat-03", "feat-01"}) {
		t.Errorf("team-b and alice, by last change: %v", rows)
	}
	b.do(chromedp.SetValue(chromedp.CSS("#sort"), "name"))
	evaluate[bool](b, `document.getElementById('sort').dispatchEvent(new Event('change')), true`)
	if rows := b.visibleRows(); !slices.Equal(rows, []string{"feat-01", "feat-03", "feat-05", "feat-07", "feat-09"}) {
		t.Errorf("team-b and alice, by name: %v", rows)
	}
	// The URL keeps the filters: a reload shows the same rows.
	b.do(chromedp.Reload(), waitFor("#features"))
	if rows := b.visibleRows(); !slices.Equal(rows, []string{"feat-01", "feat-03", "feat-05", "feat-07", "feat-09"}) {
		t.Errorf("after a reload: %v", rows)
	}
	b.do(chromedp.Navigate(b.base+"/ui/"), waitFor(`#features`))
	b.screenshots("list")
	b.checkConsole()
}

// TestBrowserUserView: what one user gets in every feature, and why, as
// the API's evaluation says.
func TestBrowserUserView(t *testing.T) {
	b := startBrowser(t)
	b.app.seed(t)
	ctx := context.Background()
	if _, err := b.app.svc.Change(ctx, "dark-mode", change.SetOverride("ada", "on"), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	off := false
	if _, err := b.app.svc.Change(ctx, "checkout", change.Patch(nil, &off, nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Navigate(b.base+"/ui/"), chromedp.Click(chromedp.CSS(`a[href="/ui/user"]`)), waitFor("#user-id"))
	b.do(fill("#user-id", "ada"), fill("#user-attrs", "country=FR\nplan=pro"), chromedp.Click(chromedp.CSS(`.user-form button[type=submit]`)))
	b.do(waitFor(`#user-result[data-user="ada"]`))
	rows := evaluate[[]string](b, `[...document.querySelectorAll('#user-result tr[data-key]')].map(tr => tr.dataset.key + ':' + tr.dataset.bucket + ':' + tr.dataset.reason)`)
	if want := []string{"checkout::" + feature.ReasonDisabled, "dark-mode:on:" + feature.ReasonOverride}; !slices.Equal(rows, want) {
		t.Errorf("ada gets %v, want %v", rows, want)
	}
	if got := b.text(`tr[data-key="dark-mode"] .why`); !strings.Contains(got, "pinned to on by an override") {
		t.Errorf("why ada gets dark-mode's on: %q", got)
	}
	if got := b.text("#user-context"); !strings.Contains(got, "country=FR") || !strings.Contains(got, "plan=pro") {
		t.Errorf("the attributes shown: %q", got)
	}
	b.screenshots("user-view")

	// The same answers as the API's evaluation, for a user on the ring.
	b.do(fill("#user-id", "user:42"), fill("#user-attrs", ""), chromedp.Click(chromedp.CSS(`.user-form button[type=submit]`)))
	b.do(waitFor(`#user-result[data-user="user:42"]`))
	var ev struct {
		Bucket string `json:"bucket"`
	}
	b.api("/evaluate?feature=dark-mode&user=user:42", &ev)
	if got := b.text(`tr[data-key="dark-mode"] .user-bucket`); got != ev.Bucket {
		t.Errorf("user:42 gets %q in dark-mode on the page, %q from the API", got, ev.Bucket)
	}

	// A bad attribute is refused with the reason.
	b.do(fill("#user-attrs", "not an attribute"), chromedp.Click(chromedp.CSS(`.user-form button[type=submit]`)), waitFor("#user-error"))
	if got := b.text("#user-error"); !strings.Contains(got, "is not key=value") {
		t.Errorf("the error for a bad attribute: %q", got)
	}
	b.checkConsole()
}

// TestBrowserTagsAndOwner: a feature created with tags and an owner from the
// list's form shows them on its page; the description form changes them
// (and only them), and the list filters by the new tag.
func TestBrowserTagsAndOwner(t *testing.T) {
	b := startBrowser(t)
	b.app.seed(t)
	b.do(chromedp.Navigate(b.base+"/ui/#create"), waitFor("#new-key"))
	b.do(
		fill("#new-key", "banner"),
		fill("#new-tags", "Growth, q4 growth"),
		fill("#new-owner", "alice@example.com"),
		fill("#bucket-rows .bucket-row:nth-of-type(1) [name=bucket-name]", "off"),
		fill("#bucket-rows .bucket-row:nth-of-type(1) [name=bucket-share]", "90"),
		fill("#bucket-rows .bucket-row:nth-of-type(2) [name=bucket-name]", "on"),
		fill("#bucket-rows .bucket-row:nth-of-type(2) [name=bucket-share]", "10"),
	)
	b.screenshots("create-tags")
	b.do(chromedp.Click(chromedp.CSS("#create-form button[type=submit]")), waitFor("#create-form .preview .apply"))
	b.do(chromedp.Click(chromedp.CSS("#create-form .preview .apply")), waitFor(`#banner[data-version="1"]`))
	if got := b.text("#feature-labels"); got != "growth q4 alice@example.com" {
		t.Errorf("the feature's labels = %q, want growth q4 alice@example.com", got)
	}

	b.do(unfold("describe"), fill("#describe-tags", "growth, checkout"), fill("#describe-owner", "team-growth"))
	if got := b.change("describe", chromedp.Steps(), "No user would change bucket", 2); got != "No user changed bucket" {
		t.Errorf("banner = %q", got)
	}
	var f struct {
		Tags        []string `json:"tags"`
		Owner       string   `json:"owner"`
		Description string   `json:"description"`
	}
	b.api("/api/features/banner", &f)
	if !slices.Equal(f.Tags, []string{"checkout", "growth"}) || f.Owner != "team-growth" {
		t.Errorf("after the edit: tags %q, owner %q", f.Tags, f.Owner)
	}
	if got := b.text(`#banner .kicker`); !strings.Contains(got, "Tags set to checkout, growth, owner set to team-growth") || strings.Contains(got, "description") {
		t.Errorf("the banner's summary = %q: want the tags and owner, not the description", got)
	}
	// Bad tags are refused with the server's reason.
	b.do(unfold("describe"), fill("#describe-tags", "no/slash"), chromedp.Click(chromedp.CSS(`form[data-kind=describe] button[type=submit]`)), waitFor(`form[data-kind=describe] .error`))
	if got := b.text(`form[data-kind=describe] .error`); !strings.Contains(got, `Tag "no/slash" is invalid`) {
		t.Errorf("the refusal of a bad tag = %q", got)
	}

	b.do(chromedp.Navigate(b.base+"/ui/?tag=checkout"), waitFor("#features"))
	if rows := b.visibleRows(); !slices.Equal(rows, []string{"banner"}) {
		t.Errorf("tag checkout on the list: %v, want banner", rows)
	}
	b.checkConsole()
}
