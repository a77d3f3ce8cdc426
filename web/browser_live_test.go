package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/rollout/ramp"
)

// send sends a JSON request to the server's API, as a script would, and
// fails the test unless it answers want.
func (b *browser) send(method, path string, body any, want int) {
	b.t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, b.base+path, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != want {
		var msg bytes.Buffer
		msg.ReadFrom(res.Body)
		b.t.Fatalf("%s %s = %d %s, want %d", method, path, res.StatusCode, msg.String(), want)
	}
}

// TestBrowserLivePages: an open feature page follows the change stream.
// A script changes the feature through the API: the page shows a banner
// saying who changed what and how many users moved, and its shares become
// the API's, without a reload. Then a ramp's step appears as it happens.
// The list marks the rows of features changed since it was loaded.
func TestBrowserLivePages(t *testing.T) {
	a := newLiveApp(t, nil)
	a.seed(t)
	b := startBrowserOn(t, a)
	ctx := context.Background()

	b.do(chromedp.Navigate(b.base+"/ui/features/checkout"), waitFor(`body[data-live="open"]`))
	evaluate[bool](b, `window.notReloaded = true`)
	b.send("PUT", "/api/features/checkout/buckets/A", map[string]any{"replicas": 30, "comment": "more A"}, 200)
	b.do(waitFor(`#live-banner li[data-version="3"]`))
	var f apiFeature
	b.api("/api/features/checkout", &f)
	if got := b.text(`#live-banner li[data-version="3"]`); !strings.Contains(got, "Changed the share of A; A 6.4 % → ") || !strings.Contains(got, "of users moved, all into A.") || strings.Contains(got, "·") {
		t.Errorf("the banner's version 3 = %q", got)
	}
	if got := b.text("#feature-version"); got != "3" {
		t.Errorf("the version shown = %q, want 3", got)
	}
	for bucket, share := range f.Shares {
		if got, want := b.shareShown(bucket), shareWant(share); got != want {
			t.Errorf("share of %s on the page = %q, the API's %q", bucket, got, want)
		}
	}
	if !evaluate[bool](b, `window.notReloaded === true`) {
		t.Error("the page reloaded")
	}
	b.screenshots("feature-live")

	// A ramp's step, as the ramp runner applies it.
	if _, err := a.svc.CreateRamp(ctx, "checkout", ramp.Spec{Bucket: "D", Shares: []float64{0.5}, Start: time.Now().Add(-time.Minute)}, "dana"); err != nil {
		t.Fatal(err)
	}
	if n, err := a.svc.ApplyDueRamps(ctx); err != nil || n != 1 {
		t.Fatalf("ApplyDueRamps = %d, %v; want 1 step", n, err)
	}
	vs, err := a.svc.Versions(ctx, "checkout", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.do(waitFor(`#live-banner li[data-version="4"]`))
	if got := b.text(`#live-banner li[data-version="4"] .live-actor`); got != vs[0].Actor {
		t.Errorf("the ramp step's actor on the banner = %q, want %q", got, vs[0].Actor)
	}
	b.api("/api/features/checkout", &f)
	if got, want := b.shareShown("D"), shareWant(f.Shares["D"]); got != want {
		t.Errorf("D after the ramp's step: %q on the page, %q from the API", got, want)
	}
	// Reload shows the new version's page, without the banner.
	b.do(chromedp.Click(chromedp.CSS("#live-banner .live-reload")), waitFor(`body[data-live="open"]`))
	if n := evaluate[int](b, `document.querySelectorAll('#live-banner').length`); n != 0 || b.text("#feature-version") != "4" {
		t.Errorf("after reloading: %d banners, version %s; want none, 4", n, b.text("#feature-version"))
	}

	// The list.
	b.do(chromedp.Navigate(b.base+"/ui/"), waitFor(`body[data-live="open"]`))
	b.send("PATCH", "/api/features/dark-mode", map[string]any{"tags": []string{"ui"}}, 200)
	b.do(waitFor(`tr[data-key="dark-mode"].live-changed`))
	if got := b.text("#live-banner .live-what"); got != "1 feature changed since this page was loaded (marked below)." {
		t.Errorf("the list's banner = %q", got)
	}
	b.screenshots("list-live")
	b.checkConsole()
}
