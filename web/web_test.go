package web_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

// app is the API and the dashboard on one router, over a service on a
// SQLite database in a temporary directory.
type app struct {
	e   *echo.Echo
	svc *rollout.Service
	db  *store.DB
}

// testPlanLimits: plans cut only by their (deterministic) step budget.
var testPlanLimits = api.PlanLimits{Timeout: time.Hour}

func newApp(t *testing.T, sample int) *app {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatalf("new service: %v", err)
	}
	// Plans end by their budget alone, never by the clock, so that a page's
	// plan is the one the test computes, however loaded the machine.
	e := api.New(svc, api.Options{Plans: testPlanLimits, Routes: web.Routes(svc, web.Options{SampleUsers: sample})})
	return &app{e: e, svc: svc, db: db}
}

// seed creates checkout (A, B, C with 3 replicas each and an empty salt,
// then D added) and dark-mode.
func (a *app) seed(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	abc := feature.Feature{
		Key: "checkout", Description: "New <b>checkout</b> flow", Enabled: true,
		Buckets: []feature.Bucket{{Name: "A", Replicas: 3}, {Name: "B", Replicas: 3}, {Name: "C", Replicas: 3}},
	}
	if _, err := a.svc.Create(ctx, abc, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.svc.Change(ctx, "checkout", change.AddBucket(feature.Bucket{Name: "D", Replicas: 3}), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	dark := feature.Feature{
		Key: "dark-mode", Description: "Dark theme", Enabled: true, Salt: "dark-mode",
		Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}},
	}
	if _, err := a.svc.Create(ctx, dark, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
}

// minilegend is a bucket's entry in the legend of a list's share bar.
func minilegend(bucket, share string) string {
	return `</span>` + bucket + ` ` + share + `</span>`
}

// legend is a bucket's entry in the legend of a share bar: its share to a
// tenth of a point, exactly in its title.
func legend(bucket string, share float64) string {
	return fmt.Sprintf(`<span class="name">%s</span> <b class="num" title="Exactly %.5f%%">%.1f%%</b>`, bucket, 100*share, 100*share)
}

// shareCell is a bucket's share in the buckets table of a feature's page,
// which names the bucket, says the share to a tenth of a point and gives
// it exactly; sharesOf has the shares.
func shareCell(bucket string, shares map[string]float64) string {
	s := shares[bucket]
	return fmt.Sprintf(`data-share="%s" data-exact="%.5f%%" title="Exactly %.5f%% of users">%.1f%%</td>`, bucket, 100*s, 100*s, 100*s)
}

func (a *app) get(t *testing.T, path string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	a.e.ServeHTTP(rec, req)
	return rec
}

func TestPages(t *testing.T) {
	a := newApp(t, 1000)
	a.seed(t)
	checkout, _ := a.svc.Snapshot().Shares("checkout")
	if fmt.Sprintf("%.4f %.4f %.4f %.4f", checkout["A"], checkout["B"], checkout["C"], checkout["D"]) != "0.0640 0.5327 0.1806 0.2227" {
		t.Fatalf("the seed's shares are %v, want A 6.40%%, B 53.27%%, C 18.06%% and D 22.27%%", checkout)
	}
	darkMode, _ := a.svc.Snapshot().Shares("dark-mode")
	if fmt.Sprintf("%.4f", darkMode["off"]) != "0.5497" {
		t.Fatalf("the seed's dark-mode serves off %v, want 54.97%%", darkMode["off"])
	}
	tests := []struct {
		name     string
		path     string
		status   int
		location string
		want     []string // in the body, in this order
		dontWant []string
	}{
		{name: "root redirects", path: "/", status: 302, location: "/ui/"},
		{name: "ui without slash redirects", path: "/ui", status: 302, location: "/ui/"},
		{
			name: "list", path: "/ui/?sort=name", status: 200,
			want: []string{
				`href="/ui/features/checkout"`, "New &lt;b&gt;checkout&lt;/b&gt; flow",
				`<span class="chip split" title="Users are split between buckets.">Split</span>`,
				minilegend("A", "6.40%"), minilegend("B", "53.27%"), minilegend("C", "18.06%"), minilegend("D", "22.27%"),
				"v2: Added bucket D; A 8.25 % → 6.4 %", `<b class="churn">22.27%</b> moved`,
				`href="/ui/features/dark-mode"`, "v1: Created", "created</span>",
				`id="create-form"`,
			},
			dontWant: []string{"No features yet", "<b>checkout</b>"},
		},
		{
			name: "list filtered", path: "/ui/?q=DARK", status: 200,
			want:     []string{`value="DARK"`, `data-key="dark-mode"`, `data-changed=`, `data-key="checkout"`, `hidden>`},
			dontWant: []string{`id="no-match" class="notice" role="status"`},
		},
		{
			name: "list filtered to nothing", path: "/ui/?q=zzz", status: 200,
			want: []string{`<p id="no-match" class="notice" role="status">No feature matches these filters.</p>`, `<span id="shown-count">0</span>`},
		},
		{
			name: "feature", path: "/ui/features/checkout", status: 200,
			want: []string{
				`<h1 id="feature-key">checkout</h1>`, `<span class="badge on">On</span>`,
				shareCell("A", checkout), shareCell("B", checkout), shareCell("C", checkout), shareCell("D", checkout),
				"a sample of 1,000 synthetic users",
				`<option value="1">version 1: A 8.25 %, B 64.78 %, C 26.97 % — created</option>`,
				`<text x="`, `>22.27%</text>`, `>75.00% mod N</text>`,
				`data-version="2"`, "<strong class=\"churn\">22.27%</strong> of users moved, all into D", "naive mod N: <b class=\"num\">75.00%</b>",
				`<td>B</td><td aria-hidden="true">→</td><td>D</td><td class="num">11.51%</td>`,
				`data-version="1"`, "Every user got a bucket.",
				`<script type="application/json" id="feature-data">{"key":"checkout","version":2,`,
			},
			// The ring's replicas and salt are under Details, not in the
			// header nor the buckets table.
			dontWant: []string{`id="banner"`, `id="lookup-result"`, "· salt", `<th scope="col" class="num">Replicas</th><th scope="col">Value</th>`},
		},
		{
			name: "feature after a change", path: "/ui/features/checkout?changed=2", status: 200,
			want: []string{
				`<main id="main" tabindex="-1">`, `<section id="banner"`, "Applied: version 2 · Added bucket D; ",
				`<span class="big">22.27%</span> of users moved, all into D`, "Naive hash mod N would have moved <b class=\"num\">75.00%</b>.",
				`<h1 id="feature-key">checkout</h1>`,
			},
		},
		{
			name: "feature after creation", path: "/ui/features/dark-mode?changed=1", status: 200,
			want:     []string{`<section id="banner"`, "Every user now gets a bucket", legend("off", darkMode["off"])},
			dontWant: []string{"Naive hash mod N"},
		},
		{
			name: "banner for an unknown version", path: "/ui/features/checkout?changed=9", status: 200,
			want:     []string{"Feature checkout has no version 9."},
			dontWant: []string{`id="banner"`},
		},
		{
			name: "banner for a malformed version", path: "/ui/features/checkout?changed=two", status: 200,
			want:     []string{`The link names version &#34;two&#34;, which is not a version number.`},
			dontWant: []string{`id="banner"`},
		},
		{
			name: "user look-up", path: "/ui/features/checkout?user=user:0", status: 200,
			want: []string{
				`value="user:0"`, `<div id="lookup-result" data-user="user:0">`, `gets <b class="now-bucket">`,
				`<tr data-version="2"`, `<tr data-version="1"`,
			},
		},
		{
			name: "user look-up without an ID", path: "/ui/features/checkout?user=", status: 422,
			want: []string{`aria-invalid="true"`, `<p class="error" id="lookup-error" role="alert">user ID must be 1 to 256 bytes of valid UTF-8</p>`},
		},
		{
			name: "user look-up with a long ID", path: "/ui/features/checkout?user=" + strings.Repeat("u", 300), status: 422,
			want:     []string{`id="lookup-error"`, "user ID must be 1 to 256 bytes"},
			dontWant: []string{`id="lookup-result"`},
		},
		{
			name: "unknown feature", path: "/ui/features/nope", status: 404,
			want: []string{"<h1>Feature not found</h1>", "There is no feature &#34;nope&#34;.", `href="/ui/"`},
		},
		{
			name: "unknown feature with markup in its key", path: "/ui/features/%3Cscript%3Ealert(1)%3C%2Fscript%3E", status: 404,
			want:     []string{"There is no feature &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;."},
			dontWant: []string{"<script>alert"},
		},
		{
			name: "unknown page", path: "/ui/nowhere", status: 404,
			want: []string{"<h1>Page not found</h1>", "There is no page at /ui/nowhere."},
		},
		{name: "asset", path: "/ui/static/app.js", status: 200, want: []string{"'use strict';"}},
		{name: "unknown asset", path: "/ui/static/nope.js", status: 404, want: []string{"<h1>Page not found</h1>"}},
		{name: "no directory listing", path: "/ui/static/", status: 404, want: []string{"<h1>Page not found</h1>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := a.get(t, tt.path)
			body := rec.Body.String()
			if rec.Code != tt.status {
				t.Fatalf("GET %s = %d, want %d\n%.2000s", tt.path, rec.Code, tt.status, body)
			}
			if got := rec.Header().Get("Location"); got != tt.location {
				t.Errorf("GET %s: Location = %q, want %q", tt.path, got, tt.location)
			}
			rest := body
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					if strings.Contains(body, w) {
						t.Errorf("GET %s: %q is out of order", tt.path, w)
					} else {
						t.Errorf("GET %s: body lacks %q", tt.path, w)
					}
					continue
				}
				rest = rest[i+len(w):]
			}
			for _, w := range tt.dontWant {
				if strings.Contains(body, w) {
					t.Errorf("GET %s: body has %q", tt.path, w)
				}
			}
		})
	}
}

func TestEmptyState(t *testing.T) {
	a := newApp(t, 100)
	rec := a.get(t, "/ui/")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /ui/ = %d, want 200", rec.Code)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`<h1 id="empty-h">No features yet — create one</h1>`,
		`<form id="create-form" class="change create" data-kind="create"`,
		`<label for="new-key">Key</label>`,
		`<template id="bucket-row-template">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("empty list lacks %q", want)
		}
	}
	if strings.Contains(body, `<details class="create-box"`) {
		t.Errorf("empty list folds the create form away; it should be open")
	}
}

func TestDisabledFeature(t *testing.T) {
	a := newApp(t, 200)
	a.seed(t)
	off := false
	if _, err := a.svc.Change(context.Background(), "checkout", change.Patch(nil, &off, nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	body := a.get(t, "/ui/features/checkout?changed=3").Body.String()
	ring, _ := a.svc.Snapshot().Shares("checkout")
	if fmt.Sprintf("%.4f", ring["B"]) != "0.5327" {
		t.Fatalf("the ring gives B %v, want 53.27%%", ring["B"])
	}
	for _, want := range []string{
		`<span class="badge off">Off</span> — no bucket is served: apps use their default`,
		`<p class="notice" id="off-now">The feature is off: no user gets a bucket now: apps use their default.</p>`,
		`<span class="big">100.00%</span> of users moved, all to no bucket (apps serve their default)`,
		`<tr class="none"><th scope="row">no bucket</th>`, `<td class="num sampled">100.00%</td>`,
		shareCell("B", ring), // the ring's shares, for when it is turned on again
		`Turn on…`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("disabled feature's page lacks %q", want)
		}
	}
	// Naive mod N is no comparison for a kill switch; it is for adding D.
	banner := body[strings.Index(body, `id="banner"`):]
	banner = banner[:strings.Index(banner, "</section>")]
	v3 := body[strings.Index(body, `<li class="version" data-version="3"`):]
	v3 = v3[:strings.Index(v3, "</li>")]
	v2 := body[strings.Index(body, `<li class="version" data-version="2"`):]
	if strings.Contains(banner, "mod N") || strings.Contains(v3, "mod N") || !strings.Contains(v2, "naive mod N") {
		t.Errorf("naive mod N: in the banner of turning off %v, in its history %v, beside adding D %v; want false, false, true",
			strings.Contains(banner, "mod N"), strings.Contains(v3, "mod N"), strings.Contains(v2, "naive mod N"))
	}
	// The list says what users get now, not the split they would get on.
	list := a.get(t, "/ui/").Body.String()
	i := strings.Index(list, `data-key="checkout"`)
	if i < 0 {
		t.Fatal("the list lacks checkout")
	}
	item := list[i:]
	item = item[:strings.Index(item, "</tr>")]
	if !strings.Contains(item, "no bucket is served; apps use their default") || !strings.Contains(item, `<span class="no-bucket">No bucket served</span>`) || strings.Contains(item, "53.27%") {
		t.Errorf("the list's item of a feature that is off:\n%s", item)
	}
}

// TestInternalError: when the store fails, the page says so with the
// request ID, and never shows the cause.
func TestInternalError(t *testing.T) {
	a := newApp(t, 100)
	a.seed(t)
	a.db.Close()
	for _, path := range []string{"/ui/", "/ui/features/checkout"} {
		rec := a.get(t, path)
		body := rec.Body.String()
		if rec.Code != http.StatusInternalServerError {
			t.Errorf("GET %s with a closed database = %d, want 500", path, rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("GET %s: Content-Type = %q, want HTML", path, ct)
		}
		id := rec.Header().Get(echo.HeaderXRequestID)
		if id == "" || !strings.Contains(body, `<code id="request-id">`+id+`</code>`) {
			t.Errorf("GET %s: the error page does not show request ID %q:\n%s", path, id, body)
		}
		if strings.Contains(body, "closed") || strings.Contains(body, "sql") {
			t.Errorf("GET %s: the error page shows the cause:\n%s", path, body)
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	a := newApp(t, 100)
	a.seed(t)
	for _, path := range []string{
		"/ui/", "/ui/features/checkout", "/ui/features/checkout?changed=2&user=u1",
		"/ui/features/nope", "/ui/nowhere", "/ui/static/app.js", "/ui/static/style.css",
	} {
		h := a.get(t, path).Header()
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "connect-src 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("GET %s: Content-Security-Policy %q allows inline code", path, csp)
		}
		if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options = %q, want nosniff", path, got)
		}
	}
}

// TestNothingInline: the Content-Security-Policy forbids inline scripts,
// styles and event handlers, so no page may have any.
func TestNothingInline(t *testing.T) {
	a := newApp(t, 100)
	empty := a.get(t, "/ui/").Body.String()
	a.seed(t)
	scriptTag := regexp.MustCompile(`<script\b[^>]*>`)
	dataScript := regexp.MustCompile(`^<script type="application/json" id="(feature|targeting|segments)-data">$`)
	inline := regexp.MustCompile(`(?i)\s(style|on[a-z]+)\s*=|<style\b|javascript:`)
	pages := map[string]string{"empty list": empty}
	for _, path := range []string{"/ui/", "/ui/features/checkout?changed=2&user=user:1", "/ui/features/checkout?user=", "/ui/features/nope", "/ui/segments"} {
		pages[path] = a.get(t, path).Body.String()
	}
	for name, body := range pages {
		for _, tag := range scriptTag.FindAllString(body, -1) {
			if !strings.Contains(tag, ` src="/ui/static/`) && !dataScript.MatchString(tag) {
				t.Errorf("%s: inline script %s", name, tag)
			}
		}
		if m := inline.FindString(body); m != "" {
			t.Errorf("%s: inline style or handler %q", name, m)
		}
	}
}

// TestAssets: every asset a page names is served, with its type, and cached
// for good only under the current version.
func TestAssets(t *testing.T) {
	a := newApp(t, 100)
	body := a.get(t, "/ui/").Body.String()
	refs := regexp.MustCompile(`(?:src|href)="(/ui/static/[^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(refs) != 8 {
		t.Fatalf("the layout names %d assets, want 8 (icon, two stylesheets, five scripts)", len(refs))
	}
	types := map[string]string{".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
	for _, ref := range refs {
		u := strings.ReplaceAll(ref[1], "&amp;", "&")
		rec := a.get(t, u)
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", u, rec.Code)
			continue
		}
		ext := filepath.Ext(strings.Split(u, "?")[0])
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, types[ext]) {
			t.Errorf("GET %s: Content-Type = %q, want %s", u, ct, types[ext])
		}
		if cc := rec.Header().Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("GET %s: Cache-Control = %q, want immutable", u, cc)
		}
	}
	if cc := a.get(t, "/ui/static/app.js?v=old").Header().Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("GET an old version: Cache-Control = %q, want no-cache", cc)
	}
}

// TestChangesRefusedCrossSite: the dashboard changes features through the
// API, which refuses requests another site's page makes.
func TestChangesRefusedCrossSite(t *testing.T) {
	a := newApp(t, 100)
	a.seed(t)
	req := httptest.NewRequest(http.MethodPost, "/api/features/checkout/buckets", strings.NewReader(`{"name":"E","replicas":3}`))
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	rec := httptest.NewRecorder()
	a.e.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("cross-site POST = %d, want 403", rec.Code)
	}
	if f, _ := a.svc.Snapshot().Feature("checkout"); f.Version != 2 {
		t.Errorf("after a cross-site POST, checkout is at version %d, want 2", f.Version)
	}
}

// TestServedToApps: the buckets table shows what apps were served at the
// current version, and viewing the page (its sample, a user look-up) adds
// nothing to it.
func TestServedToApps(t *testing.T) {
	a := newApp(t, 1000)
	a.seed(t)
	if body := a.get(t, "/ui/features/dark-mode").Body.String(); !strings.Contains(body, `data-served="on">—`) {
		t.Fatalf("before any evaluation the served column should be empty (—):\n%s", body)
	}
	for range 3 {
		a.svc.Evaluate("dark-mode", "vip") // one user, one bucket
	}
	e, _ := a.svc.Snapshot().Peek("dark-mode", "vip")
	a.get(t, "/ui/features/dark-mode?user=vip")
	body := a.get(t, "/ui/features/dark-mode").Body.String()
	// Served to apps counts distinct users: vip, once.
	want := `data-served="` + e.Bucket + `">100.00% <span class="hint">(1)</span>`
	if !strings.Contains(body, want) {
		t.Errorf("page lacks %q: vip, evaluated 3 times, and only vip, should be served to apps", want)
	}
	if rep, _ := a.svc.Exposures(context.Background(), "dark-mode"); rep.Total != 3 || rep.Users != 1 {
		t.Errorf("exposures after viewing the page = %d evaluations of %d users, want the 3 evaluations of vip", rep.Total, rep.Users)
	}

	// After a change, until apps are served the new version, the column
	// keeps version 1's counts and says so; then it shows version 2's.
	desc := "darker"
	if _, err := a.svc.Change(context.Background(), "dark-mode", change.Patch(&desc, nil, nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	body = a.get(t, "/ui/features/dark-mode").Body.String()
	for _, want := range []string{want, `Served to apps <span class="hint">at v1</span>`, "none yet at version 2, so the previous version's counts are shown"} {
		if !strings.Contains(body, want) {
			t.Errorf("after a change, the page lacks %q", want)
		}
	}
	a.svc.Evaluate("dark-mode", "vip")
	body = a.get(t, "/ui/features/dark-mode").Body.String()
	if want := `data-served="` + e.Bucket + `">100.00% <span class="hint">(1)</span>`; !strings.Contains(body, want) || strings.Contains(body, "at v1") {
		t.Errorf("once version 2 is served, the page lacks %q or still shows version 1's counts", want)
	}
}

// fakeSessions is a server that asks for tokens, where every request is
// signed in as vera, a viewer.
type fakeSessions struct{}

func (fakeSessions) Enforced() bool { return true }
func (fakeSessions) SignIn(echo.Context, string) (auth.Token, bool) {
	return auth.Token{}, false
}
func (fakeSessions) SignOut(echo.Context) error { return nil }
func (fakeSessions) Who(echo.Context) (auth.Token, bool) {
	return auth.Token{Name: "vera", Role: auth.RoleViewer}, true
}

// TestSignOutOnlyWithTokens: pages offer to sign out only on a server that
// asks for tokens, and say who is signed in; the sign-in page does not
// offer to sign out.
func TestSignOutOnlyWithTokens(t *testing.T) {
	open := newApp(t, 10)
	if body := open.get(t, "/ui/").Body.String(); strings.Contains(body, `action="/ui/logout"`) {
		t.Error("an open server's page offers to sign out")
	}
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := rollout.NewService(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := api.New(svc, api.Options{Routes: web.Routes(svc, web.Options{Sessions: fakeSessions{}})})
	req := httptest.NewRequest(http.MethodGet, "/ui/", nil)
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if !strings.Contains(rec.Body.String(), `action="/ui/logout"`) {
		t.Error("a page of a server that asks for tokens does not offer to sign out")
	}
	if !strings.Contains(rec.Body.String(), `Signed in as <b id="who">vera</b>`) {
		t.Error("a page does not say who is signed in")
	}
	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/login", nil))
	if body := rec.Body.String(); rec.Code != 200 || strings.Contains(body, `action="/ui/logout"`) || strings.Contains(body, "Signed in as") {
		t.Errorf("GET /ui/login = %d, offers to sign out or names who is signed in:\n%s", rec.Code, body)
	}
}

// TestAuditLogPages: the audit log lists 50 changes a page, newest first,
// with a link to the older ones that keeps the filter; a bad cursor is
// explained, not a failure.
func TestAuditLogPages(t *testing.T) {
	a := newApp(t, 10)
	a.seed(t) // checkout v1, v2; dark-mode v1
	ctx := context.Background()
	for i := range 55 {
		n := 3 + i%4
		if _, err := a.svc.Change(ctx, "checkout", change.UpdateBucket("A", &n, nil), rollout.ChangeOptions{Actor: "bot", Comment: fmt.Sprintf("step %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	entries := regexp.MustCompile(`<li class="version change-entry" data-feature="([^"]+)" data-version="(\d+)" data-actor="([^"]+)" data-kind="[a-z_]+">`)
	older := regexp.MustCompile(`<a href="([^"]+)" id="older-changes">`)

	body := a.get(t, "/ui/changes?actor=bot").Body.String()
	got := entries.FindAllStringSubmatch(body, -1)
	if len(got) != 50 || got[0][2] != "57" || got[49][2] != "8" || !strings.Contains(body, "Comment:</span> step 54") {
		t.Fatalf("first page of bot's changes: %d entries from v%s", len(got), got[0][2])
	}
	m := older.FindStringSubmatch(body)
	if m == nil || !strings.Contains(m[1], "actor=bot") {
		t.Fatalf("first page's link to older changes = %v, want one that keeps actor=bot", m)
	}
	body = a.get(t, html.UnescapeString(m[1])).Body.String()
	got = entries.FindAllStringSubmatch(body, -1)
	if len(got) != 5 || got[0][2] != "7" || got[4][2] != "3" || older.MatchString(body) {
		t.Errorf("second page: %d entries, link %v; want versions 7 to 3 and no link", len(got), older.FindStringSubmatch(body))
	}
	body = a.get(t, "/ui/changes?before=x").Body.String()
	if !strings.Contains(body, "which is not a position in the log") || len(entries.FindAllString(body, -1)) != 50 {
		t.Error("a bad cursor is not explained, or the newest changes are not shown")
	}
}
