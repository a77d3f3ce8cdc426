package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// confirmBig types the feature's key into an escalated preview of the
// form (a change above the churn limit), which Apply waits for.
func (b *browser) confirmBig(form string) {
	b.t.Helper()
	if evaluate[bool](b, `!!document.querySelector(`+fmt.Sprintf("%q", form+".preview .escalate input")+`)`) {
		b.do(fill(form+".preview .escalate input", b.text("#feature-key")))
	}
}

// TestBrowserPMLanguage: the feature page speaks a product manager's
// language. The header says users a day (the last day's distinct users)
// and keeps replicas and salt under Details; times read in local time with
// UTC in their title; the history's summaries are percentages. A rollback
// above the churn limit is amber, names the pinned user it would release,
// and applies only with the key typed; keeping the pins keeps them. A
// reshuffle's Apply is red. The ramp form defaults to the bucket that is
// not the control, previews each step with a start time and a comment,
// and the header then shows a Ramping chip.
func TestBrowserPMLanguage(t *testing.T) {
	ctx := context.Background()
	b := startBrowser(t)
	b.app.seed(t)
	svc := b.app.svc
	for i := range 3 * 1234 { // 1,234 users, each evaluated three times
		if _, err := svc.Snapshot().Evaluate("dark-mode", fmt.Sprintf("user-%d", i%1234)); err != nil {
			t.Fatal(err)
		}
	}
	ten := 10
	if _, err := svc.Change(ctx, "dark-mode", change.SetOverride("alice", "on"), rollout.ChangeOptions{Actor: "olga"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Change(ctx, "dark-mode", change.UpdateBucket("on", &ten, nil), rollout.ChangeOptions{Actor: "olga", Comment: "too many complaints"}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode"), waitFor("#feature-key"))

	// Distinct users, estimated (within about 1.6 %), rounded to three figures.
	if got := b.text("#daily-users"); !regexp.MustCompile(`^≈ 1,(2[0-9]|3[0-9])0 users a day$`).MatchString(got) {
		t.Errorf("users a day = %q, want ≈ 1,234 users (not 3,700 evaluations)", got)
	}
	if got := b.text(".feature-head .status"); strings.Contains(got, "salt") || strings.Contains(got, "replica") {
		t.Errorf("the header says %q: replicas and salt belong under Details", got)
	}
	if evaluate[bool](b, `document.querySelector('#ring-details').open || document.querySelector('#feature-salt').checkVisibility()`) {
		t.Error("the ring's details show before they are opened")
	}
	b.do(chromedp.Click(chromedp.CSS("#ring-details summary")), waitFor("#feature-salt"))
	if got := b.text("#feature-salt"); got != "dark-mode" {
		t.Errorf("salt under Details = %q", got)
	}
	if got := b.text(`table.ring-replicas tr[data-bucket="on"] td.reps`); got != "10" {
		t.Errorf("on's replicas under Details = %q", got)
	}
	// Local times, UTC in the title.
	title := evaluate[string](b, `document.querySelector('#history time').title`)
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d UTC$`).MatchString(title) {
		t.Errorf("a history time's title = %q, want the UTC time", title)
	}
	if got := b.text("#v3 h3"); !strings.HasPrefix(got, "v3 Changed the share of on; off 54.97 % → ") || !strings.HasSuffix(got, "of users moved, all into off") {
		t.Errorf("history summary = %q", got)
	}
	if got := evaluate[string](b, `document.querySelector('#ramp-bucket').value`); got != "on" {
		t.Errorf("the ramp form's bucket = %q, want on (off reads as the control)", got)
	}

	// A rollback to version 1: on 9 % → 45 %, above the 25 % churn limit?
	// No: about 36 % of users move, which is above it.
	form := `form[data-kind=rollback] `
	b.do(unfold("rollback"), chromedp.SetValue(chromedp.CSS("#rollback-version"), "1"), chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"), waitFor(form+".pins-note[data-done]"))
	if !evaluate[bool](b, `document.querySelector('form[data-kind=rollback] .preview').classList.contains('escalated')`) {
		t.Error("a rollback above the churn limit is not escalated")
	}
	if got := b.text(form + ".pins-note"); !strings.HasPrefix(got, "Releases 1 pinned user: alice (on).") {
		t.Errorf("pins note = %q", got)
	}
	if got := b.text(form + ".escalate p"); !strings.HasPrefix(got, "A big change: ") || !strings.Contains(got, "above the churn limit of 25.00%") {
		t.Errorf("escalation = %q", got)
	}
	if !evaluate[bool](b, `document.querySelector('form[data-kind=rollback] .preview .apply').disabled`) {
		t.Error("Apply of a big change is enabled before the key is typed")
	}
	if got := b.text(form + ".daily-moved"); !regexp.MustCompile(`^≈ [0-9,]+ of ≈ 1,[23][0-9]0 users a day`).MatchString(got) {
		t.Errorf("users moved a day = %q", got)
	}
	b.screenshots("pm-rollback")
	b.shotsOf("pm-rollback-form", `form[data-kind=rollback]`)
	b.do(fill(form+".preview .escalate input", "dark-mod"))
	if !evaluate[bool](b, `document.querySelector('form[data-kind=rollback] .preview .apply').disabled`) {
		t.Error("Apply is enabled with the key mistyped")
	}
	// Keep the pins: the preview says every pin stays.
	b.do(chromedp.Click(chromedp.CSS("#rollback-keep")), chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"))
	b.do(waitFor(form + ".pins-note[data-done]"))
	if got := b.text(form + ".pins-note"); got != "Every pinned user stays pinned." {
		t.Errorf("pins note, keeping them = %q", got)
	}
	b.confirmBig(form)
	b.do(chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="4"]`))
	f, _ := svc.Snapshot().Feature("dark-mode")
	if f.Overrides["alice"] != "on" || mustBucketReplicas(f, "on") != 100 {
		t.Errorf("after the rollback keeping the pins: %v, overrides %v", f.Buckets, f.Overrides)
	}
	if got := b.text("#banner .kicker"); !strings.HasPrefix(got, "Applied: version 4 · Rolled back to version 1, keeping the pinned users; ") {
		t.Errorf("banner = %q", got)
	}

	// A reshuffle's Apply is red (and, moving about half the users, waits
	// for the key).
	b.do(chromedp.Reload(), waitFor("#feature-key"))
	b.do(unfold("reshuffle"), chromedp.Click(chromedp.CSS(`form[data-kind=reshuffle] button[type=submit]`)), waitFor(`form[data-kind=reshuffle] .preview .apply`))
	if cls := evaluate[string](b, `document.querySelector('form[data-kind=reshuffle] .preview .apply').className`); !strings.Contains(cls, "danger") {
		t.Errorf("reshuffle Apply class = %q, want danger", cls)
	}
	b.do(chromedp.Click(chromedp.CSS(`form[data-kind=reshuffle] .preview .cancel`)))

	// The ramp form: start tomorrow, a comment, a preview of each step.
	rf := `form[data-ramp=create] `
	start := time.Now().Add(24 * time.Hour).Format("2006-01-02T15:04")
	b.do(openAt(rf), fill("#ramp-steps", "60, 75"), chromedp.SetValue(chromedp.CSS("#ramp-start"), start),
		fill("#ramp-comment", "slow and steady"), chromedp.Click(chromedp.CSS(rf+"button[type=submit]")), waitFor(rf+".preview .apply"))
	if got := evaluate[[]string](b, `[...document.querySelectorAll('table.ramp-preview .reached')].map(td => td.textContent)`); len(got) != 2 || !strings.HasPrefix(got[0], "60.") && !strings.HasPrefix(got[0], "59.") {
		t.Errorf("ramp preview reaches %q", got)
	}
	if got := b.text(rf + "table.ramp-preview tr[data-step='1'] td.moved"); !regexp.MustCompile(`^[0-9.]+% \(≈ [0-9,]+ users a day\)$`).MatchString(got) {
		t.Errorf("ramp preview step 1 moves %q", got)
	}
	b.screenshots("pm-ramp-preview")
	b.shotsOf("pm-ramp-form", `form[data-ramp=create]`)
	b.do(chromedp.Click(chromedp.CSS(rf+".preview .apply")), waitFor(`li.ramp[data-state=active]`), waitFor("#ramp-chip"))
	if got := b.text("#ramp-chip"); !strings.HasPrefix(got, "Ramping → 60 % in ") {
		t.Errorf("ramp chip = %q", got)
	}
	rs, _ := svc.Ramps(ctx, "dark-mode")
	if len(rs) != 1 || rs[0].Comment != "slow and steady" || rs[0].Steps[0].At.Before(time.Now().Add(23*time.Hour)) {
		t.Errorf("ramp stored %+v", rs)
	}
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode"), waitFor("#ramp-chip"))
	b.screenshots("pm-header")
	b.do(chromedp.Click(chromedp.CSS("#ring-details summary")))
	b.shotsOf("pm-head", `.feature-head`)
	b.shotsOf("pm-buckets", `#buckets`)
}

func mustBucketReplicas(f feature.Feature, name string) int {
	b, _ := f.Bucket(name)
	return b.Replicas
}

// shotsOf saves the element sel (its box, the page around it not) at 1280
// and 390 px, light and dark: what a look at one change needs.
func (b *browser) shotsOf(name, sel string) {
	b.t.Helper()
	for _, dark := range []bool{false, true} {
		for _, width := range []int64{1280, 390} {
			suffix := map[int64]string{1280: "-wide", 390: "-narrow"}[width]
			if dark {
				suffix += "-dark"
			}
			b.do(darkMode(dark), chromedp.EmulateViewport(width, 900))
			png, err := chromedp.Run(b.ctx, chromedp.Screenshot(chromedp.CSS(sel)))
			if err != nil {
				b.t.Fatalf("screenshot of %s: %v", sel, err)
			}
			path := filepath.Join(b.artifacts, name+suffix+".png")
			if err := os.WriteFile(path, png, 0o644); err != nil {
				b.t.Fatal(err)
			}
			b.t.Logf("screenshot: %s", path)
		}
	}
	b.do(darkMode(false), chromedp.EmulateViewport(1280, 900))
}
