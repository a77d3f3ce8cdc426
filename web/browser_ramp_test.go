package web_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/rollout"
)

// TestBrowserRamp: on dark-mode (off and on at 50 % each) a product manager
// is refused steps that do not increase, in words, then starts a ramp of on
// to 60 %, 75 %, 90 % an hour apart from the page and sees its schedule; the
// runner applies the first step and the page shows it applied with its
// version, and the next step; they pause it (the page says paused and why),
// resume it and cancel it. A second ramp with a churn limit too low for its
// step is paused by the runner, and the page says why it stopped.
func TestBrowserRamp(t *testing.T) {
	ctx := context.Background()
	b := startBrowser(t)
	b.app.seed(t)
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode"), waitFor("#feature-key"))
	if n := evaluate[int](b, `document.querySelectorAll('nav.toc a[href="#ramps"]').length`); n != 1 {
		t.Error("the table of contents has no link to the ramps")
	}
	if got := b.text("#no-ramps"); got != "No ramps yet." {
		t.Errorf("no ramps = %q", got)
	}

	form := `form[data-ramp=create] `
	b.do(openAt(form), chromedp.SetValue(chromedp.CSS("#ramp-bucket"), "on"), fill("#ramp-steps", "60, 50, 55"),
		chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(form+".error"))
	if got, want := b.text(form+".error"), "Step 3 is not below step 2: the steps of a ramp down must all decrease."; got != want {
		t.Errorf("steps down then up = %q, want %q", got, want)
	}
	b.do(fill("#ramp-steps", "60, 75, 90"), fill("#ramp-every", "1"), chromedp.SetValue(chromedp.CSS("#ramp-unit"), "h"))
	if hidden := evaluate[bool](b, `document.querySelector('form[data-ramp=create] .error').hidden`); !hidden {
		t.Error("the stale error stays after the form changed")
	}
	if got := b.text(form + ".ramp-schedule"); !strings.HasPrefix(got, "Schedule: 60.00% now, 75.00% at ") {
		t.Errorf("schedule before starting = %q", got)
	}
	b.screenshot("ramp-form-wide", 1280)
	b.screenshot("ramp-form-narrow", 390)
	// Preview first (a dry run: each step's share and users moved), then
	// start.
	b.do(chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(form+`.preview .apply`))
	if got := evaluate[[]string](b, `[...document.querySelectorAll('table.ramp-preview .reached')].map(td => td.textContent)`); len(got) != 3 {
		t.Errorf("the ramp's preview reaches %q, want 3 steps", got)
	}
	b.do(chromedp.Click(chromedp.CSS(form+`.preview .apply`)), waitFor(`li.ramp[data-state=active]`))

	if got := b.text(`li.ramp .ramp-state`); got != "Active" {
		t.Errorf("state = %q", got)
	}
	if got := evaluate[[]string](b, `[...document.querySelectorAll('li.ramp table.ramp-steps td.target')].map(td => td.textContent)`); strings.Join(got, " ") != "60.00% 75.00% 90.00%" {
		t.Errorf("schedule's targets = %v", got)
	}
	if n := evaluate[int](b, `document.querySelectorAll('form[data-ramp=create]').length`); n != 0 {
		t.Error("the page offers a second ramp while one is live")
	}
	if got := b.text(`li.ramp .ramp-next`); !strings.HasPrefix(got, "Next: step 1, on to 60.00% at ") {
		t.Errorf("next before the runner = %q", got)
	}

	// The runner applies the first step, due at once.
	if n, err := b.app.svc.ApplyDueRamps(ctx); err != nil || n != 1 {
		t.Fatalf("ApplyDueRamps = %d, %v; want 1 step", n, err)
	}
	b.do(chromedp.Reload(), waitFor(`li.ramp[data-state=active] tr[data-step="2"].next`))
	var f apiFeature
	b.api("/api/features/dark-mode", &f)
	if f.Version != 2 || math.Abs(f.Shares["on"]-0.6) > 0.005 {
		t.Errorf("after step 1: version %d, shares %v; want version 2, on at 60 %%", f.Version, f.Shares)
	}
	if got := b.text(`li.ramp tr[data-step="1"] td.applied`); !strings.HasPrefix(got, fmt.Sprintf("version 2 · reached %.2f%% ", 100*f.Shares["on"])) {
		t.Errorf("step 1 applied = %q, want version 2 and its share", got)
	}
	if got := b.text(`li.ramp tr[data-step="2"] td.applied`); got != "next" {
		t.Errorf("step 2 = %q", got)
	}
	if got := b.text(`li.ramp .ramp-next`); !strings.HasPrefix(got, "Next: step 2, on to 75.00% at ") || !strings.Contains(got, "(in ") {
		t.Errorf("next after step 1 = %q", got)
	}
	if got, want := b.shareShown("on"), shareWant(f.Shares["on"]); got != want {
		t.Errorf("the buckets table shows on at %q, want %q", got, want)
	}
	b.screenshot("ramp-active-wide", 1280)
	b.screenshot("ramp-active-narrow", 390)

	// Pause, resume, cancel.
	b.do(chromedp.Click(chromedp.CSS(`li.ramp button[data-ramp-action=pause]`)), waitFor(`li.ramp[data-state=paused]`))
	if got := b.text(`li.ramp .ramp-state`); got != "Paused" {
		t.Errorf("state after pause = %q", got)
	}
	if got := b.text(`li.ramp .ramp-reason`); !strings.HasPrefix(got, "Why it stopped: paused by ") {
		t.Errorf("paused reason = %q", got)
	}
	if got := b.text(`li.ramp .ramp-next`); !strings.HasPrefix(got, "Next, once resumed: step 2, on to 75.00% at ") {
		t.Errorf("next while paused = %q", got)
	}
	if n := evaluate[int](b, `document.querySelectorAll('li.ramp button[data-ramp-action=pause]').length`); n != 0 {
		t.Error("a paused ramp offers to pause")
	}
	b.screenshot("ramp-paused-wide", 1280)
	b.do(chromedp.Click(chromedp.CSS(`li.ramp button[data-ramp-action=resume]`)), waitFor(`li.ramp[data-state=active]`))
	if n := evaluate[int](b, `document.querySelectorAll('li.ramp .ramp-reason').length`); n != 0 {
		t.Error("a resumed ramp still says why it stopped")
	}
	// Someone else pauses it meanwhile: the page's Pause says so in words,
	// and Reload shows it paused.
	rs, err := b.app.svc.Ramps(ctx, "dark-mode")
	if err != nil || len(rs) != 1 {
		t.Fatalf("ramps = %v, %v", rs, err)
	}
	if _, err := b.app.svc.PauseRamp(ctx, "dark-mode", rs[0].ID, rollout.RampOptions{Actor: "olga"}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Click(chromedp.CSS(`li.ramp button[data-ramp-action=pause]`)), waitFor(`li.ramp .ramp-actions .error .reload`))
	if got, want := b.text(`li.ramp .ramp-actions .error`), "This ramp is paused, not active: only an active ramp can be paused. Reload"; got != want {
		t.Errorf("pausing a ramp paused meanwhile = %q, want %q", got, want)
	}
	b.do(chromedp.Click(chromedp.CSS(`li.ramp .ramp-actions .error .reload`)), waitFor(`li.ramp[data-state=paused]`))
	if got := b.text(`li.ramp .ramp-reason`); got != "Why it stopped: paused by olga" {
		t.Errorf("reason after reload = %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(`li.ramp button[data-ramp-action=resume]`)), waitFor(`li.ramp[data-state=active]`))

	// Cancel asks once more in the button itself.
	cancel := `li.ramp button[data-ramp-action=cancel]`
	b.do(chromedp.Click(chromedp.CSS(cancel)))
	if got := b.text(cancel); !strings.HasPrefix(got, "Yes, cancel it") {
		t.Errorf("cancel button after one click = %q", got)
	}
	if r := evaluate[string](b, `document.querySelector('li.ramp').dataset.state`); r != "active" {
		t.Errorf("one click on cancel made the ramp %s", r)
	}
	b.do(chromedp.Click(chromedp.CSS(cancel)), waitFor(`li.ramp[data-state=canceled]`), waitFor("#start-ramp"), openAt(form), waitFor(form))
	if n := evaluate[int](b, `document.querySelectorAll('li.ramp .ramp-actions, li.ramp .ramp-next').length`); n != 0 {
		t.Error("a canceled ramp offers actions or a next step")
	}
	if got := b.text(`li.ramp .ramp-reason`); !strings.HasPrefix(got, "Canceled by ") {
		t.Errorf("canceled = %q", got)
	}

	// A churn limit the next step would break: the runner pauses the ramp,
	// and the page says why.
	b.do(chromedp.SetValue(chromedp.CSS("#ramp-bucket"), "on"), fill("#ramp-steps", "80"), fill("#ramp-max-churn", "1"),
		chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(form+`.preview table.ramp-preview .error-text`))
	// The preview foresees it.
	if got := b.text(form + `.preview table.ramp-preview .error-text`); !strings.HasPrefix(got, "would pause here: the step would move ") {
		t.Errorf("preview of a step over the churn limit = %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(form+`.preview .apply`)), waitFor(`li.ramp[data-state=active]`))
	if _, err := b.app.svc.ApplyDueRamps(ctx); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Reload(), waitFor(`li.ramp[data-state=paused] .ramp-reason`))
	if got := b.text(`li.ramp[data-state=paused] .ramp-reason`); !strings.HasPrefix(got, "Why it stopped: step 1 of 1: the change would move ") || !strings.Contains(got, "more than the ramp's churn limit of 1.") {
		t.Errorf("reason of the churn guard = %q", got)
	}
	if n := evaluate[int](b, `document.querySelectorAll('li.ramp').length`); n != 2 {
		t.Errorf("%d ramps listed, want 2", n)
	}
	b.screenshot("ramp-guard-wide", 1280)
	b.screenshot("ramp-guard-narrow", 390)
	b.checkConsole()
}
