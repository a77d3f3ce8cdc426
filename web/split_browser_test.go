package web_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserSplitShares: a rule's split is set from the rules form, a
// percentage per bucket: 50/50 is stored as exactly half each with its
// planned ring; 90/10 then 50/50 again gives the same ring back (the same
// users return); shares that do not add up to 100 % are refused in words
// and change nothing.
func TestBrowserSplitShares(t *testing.T) {
	b := startBrowser(t)
	b.app.seed(t)
	form := "form[data-targeting=rules] "
	r1 := ".rule-list li.rule:nth-child(1) "
	open := func(n int) {
		b.do(chromedp.Navigate(fmt.Sprintf("%s/ui/features/dark-mode?n=%d#targeting", b.base, n)), openAt("form[data-targeting=rules]"), waitFor(form+".add-rule"))
	}
	setShares := func(off, on string) {
		setSelect(b, r1+"[name=serve]", "split")
		b.do(fill(r1+`[name=split-share][data-bucket=off]`, off), fill(r1+`[name=split-share][data-bucket=on]`, on))
	}
	apply := func(version int) {
		b.do(chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"),
			chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(fmt.Sprintf(`#banner[data-version="%d"]`, version)))
	}
	stored := func() (map[string]float64, string) {
		var f apiRules
		b.api("/api/features/dark-mode", &f)
		if len(f.Rules) != 1 || f.Rules[0].Serve.SplitRing == nil {
			t.Fatalf("stored rules %s, want one rule with a split and its ring", rulesJSON(t, f.Rules))
		}
		ring, _ := json.Marshal(f.Rules[0].Serve.SplitRing)
		return f.Rules[0].Serve.Split, string(ring)
	}

	open(1)
	b.do(chromedp.Click(chromedp.CSS(form+".add-rule")), waitFor(r1+".cond [name=attribute]"),
		fill(r1+"[name=rule-name]", "enterprise"), fill(r1+".cond:nth-child(1) [name=attribute]", "plan"),
		fill(r1+".cond:nth-child(1) [name=value]", "enterprise"))
	setShares("50", "50")
	if got, want := b.text(r1+".rule-sentence"), "If plan equals enterprise → serve a split: off 50 %, on 50 %"; got != want {
		t.Errorf("the rule reads %q, want %q", got, want)
	}
	apply(2)
	split, half := stored()
	if split["off"] != 0.5 || split["on"] != 0.5 {
		t.Fatalf("stored split %v, want exactly half each", split)
	}

	open(2)
	setShares("90", "10")
	apply(3)
	if split, _ := stored(); split["off"] != 0.9 || split["on"] != 0.1 {
		t.Fatalf("stored split %v, want off 0.9, on 0.1", split)
	}
	open(3)
	setShares("50", "50")
	apply(4)
	if _, again := stored(); again != half {
		t.Errorf("50 → 10 → 50 gives the ring %s, want the first one %s back", again, half)
	}

	open(4)
	setShares("60", "30")
	b.do(chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".error:not([hidden])"))
	if got := b.text(form + ".error"); !strings.Contains(got, "add up to 90 %, not 100 %") {
		t.Errorf("shares of 90 %% in all are refused with %q", got)
	}
	var f apiRules
	b.api("/api/features/dark-mode", &f)
	if f.Version != 4 {
		t.Errorf("after the refusal the feature is at version %d, want 4", f.Version)
	}
	b.checkConsole()
}
