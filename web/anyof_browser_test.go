package web_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/rollout/feature"
)

// TestBrowserAnyOf: a rule's any-of condition made in the editor ("Add an
// any-of group": plan equals enterprise, or email ends with @example.com
// in any case), said in the rule's sentence, refused in words with fewer
// than two alternatives, applied and stored as one {"any":[…]} condition
// that serves bob@EXAMPLE.COM; then loaded again into the same editor,
// given a third alternative (country is one of DE, AT) and applied.
func TestBrowserAnyOf(t *testing.T) {
	b := startBrowser(t)
	b.app.seed(t)
	form := "form[data-targeting=rules] "
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode#targeting"), openAt("form[data-targeting=rules]"), waitFor(form+".add-rule"),
		chromedp.Click(chromedp.CSS(form+".add-rule")))
	r1 := ".rule-list li.rule:nth-child(1) "
	b.do(waitFor(r1+".add-any"), fill(r1+"[name=rule-name]", "paying"),
		chromedp.Click(chromedp.CSS(r1+".add-any")), waitFor(r1+".cond-group .alts > li.alt:nth-child(2) [name=attribute]"),
		// The new rule's plain condition is not wanted: the group alone.
		chromedp.Click(chromedp.CSS(r1+".conds > li.cond:nth-child(1) > .remove-cond")))
	if n := evaluate[int](b, `document.querySelectorAll('.rule-list li.rule:nth-child(1) .conds > li.cond').length`); n != 1 {
		t.Fatalf("the rule has %d conditions, want the group alone", n)
	}
	g := r1 + ".conds > li.cond-group:nth-child(1) "
	alt := func(i int) string { return g + ".alts > li.alt:nth-child(" + string(rune('0'+i)) + ") " }

	// One alternative is not a group: said in words, and refused.
	b.do(chromedp.Click(chromedp.CSS(alt(2) + ".remove-alt")))
	if got := b.text(r1 + ".rule-sentence"); !strings.Contains(got, "needs at least two alternatives") {
		t.Errorf("with one alternative the rule reads %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".error"))
	if got := b.text(form + ".error"); !strings.Contains(got, "Rule 1, condition 1: an any-of group needs at least two alternatives") {
		t.Errorf("applying a group of one says %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(g+".add-alt")), waitFor(alt(2)+"[name=attribute]"))

	b.do(fill(alt(1)+"[name=attribute]", "plan"), fill(alt(1)+"[name=value]", "enterprise"),
		fill(alt(2)+"[name=attribute]", "email"))
	setSelect(b, alt(2)+"[name=op]", "ends_with")
	b.do(fill(alt(2)+"[name=value]", "@example.com"))
	if !evaluate[bool](b, `document.querySelector('.rule-list li.rule:nth-child(1) .alts > li.alt:nth-child(2) [name=ignore_case]').checked`) {
		t.Errorf("ignore case is not ticked for the alternative on email")
	}
	if evaluate[bool](b, `document.querySelector('.rule-list li.rule:nth-child(1) .alts > li.alt:nth-child(1) [name=ignore_case]').checked`) {
		t.Errorf("ignore case is ticked for the alternative on plan")
	}
	setSelect(b, r1+"[name=serve]", "bucket:on")
	if got, want := b.text(r1+".rule-sentence"), "If (plan equals enterprise or email ends with @example.com (any case)) → serve on"; got != want {
		t.Errorf("rule reads %q, want %q", got, want)
	}
	if got := b.text(g + ".alts"); !strings.HasPrefix(got, "either") || !strings.Contains(got, "or") {
		t.Errorf("the alternatives read %q, want them joined by either … or", got)
	}
	b.screenshot("anyof-wide", 1280)
	b.screenshot("anyof-narrow", 390)
	if src, err := os.ReadFile(axeScript); err == nil {
		for _, v := range b.axe(string(src)) {
			t.Errorf("axe on the any-of editor: %s", v)
		}
	}
	b.do(chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"),
		chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="2"]`))

	plan := feature.Condition{Attribute: "plan", Op: "eq", Value: json.RawMessage(`"enterprise"`)}
	email := feature.Condition{Attribute: "email", Op: "ends_with", Value: json.RawMessage(`"@example.com"`), IgnoreCase: true}
	country := feature.Condition{Attribute: "country", Op: "in", Value: json.RawMessage(`["DE","AT"]`)}
	paying := func(alts ...feature.Condition) []feature.Rule {
		return []feature.Rule{{Name: "paying", Conditions: []feature.Condition{{Any: alts}}, Serve: feature.Serve{Bucket: "on"}}}
	}
	var f apiRules
	b.api("/api/features/dark-mode", &f)
	if got, want := rulesJSON(t, f.Rules), rulesJSON(t, paying(plan, email)); got != want {
		t.Errorf("stored rules\n%s\nwant\n%s", got, want)
	}
	serves := func(user string, ctx map[string]any) (rule, bucket string) {
		t.Helper()
		var answer struct {
			Results map[string]struct {
				Bucket string `json:"bucket"`
				Rule   string `json:"rule"`
			} `json:"results"`
		}
		b.postJSON("/evaluate", map[string]any{"user": user, "features": []string{"dark-mode"}, "context": ctx}, &answer)
		r := answer.Results["dark-mode"]
		return r.Rule, r.Bucket
	}
	if rule, bucket := serves("bob", map[string]any{"email": "bob@EXAMPLE.COM", "plan": "free"}); rule != "paying" || bucket != "on" {
		t.Errorf("bob@EXAMPLE.COM gets rule %q, bucket %q; want rule paying, bucket on", rule, bucket)
	}
	if rule, _ := serves("carol", map[string]any{"email": "carol@example.org", "plan": "free", "country": "AT"}); rule == "paying" {
		t.Errorf("carol@example.org on plan free gets rule paying")
	}

	// The stored group loads into the editor, with its fields as stored.
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode?again=1#targeting"), openAt("form[data-targeting=rules]"), waitFor(alt(2)+"[name=attribute]"))
	got := evaluate[[]string](b, `[...document.querySelectorAll('.rule-list li.rule:nth-child(1) .alts > li.alt')].map(a =>
		[a.querySelector('[name=attribute]').value, a.querySelector('[name=op]').value, a.querySelector('[name=value]').value, String(a.querySelector('[name=ignore_case]').checked)].join(' '))`)
	if strings.Join(got, "; ") != "plan eq enterprise false; email ends_with @example.com true" {
		t.Errorf("the group loads as %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(g+".add-alt")), waitFor(alt(3)+"[name=attribute]"), fill(alt(3)+"[name=attribute]", "country"))
	setSelect(b, alt(3)+"[name=op]", "in")
	b.do(fill(alt(3)+"[name=value]", "DE, AT"))
	if got, want := b.text(r1+".rule-sentence"), "If (plan equals enterprise or email ends with @example.com (any case) or country is one of DE, AT) → serve on"; got != want {
		t.Errorf("rule reads %q, want %q", got, want)
	}
	b.do(chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"),
		chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="3"]`))
	b.api("/api/features/dark-mode", &f)
	if got, want := rulesJSON(t, f.Rules), rulesJSON(t, paying(plan, email, country)); got != want {
		t.Errorf("stored rules\n%s\nwant\n%s", got, want)
	}
	if rule, bucket := serves("carol", map[string]any{"email": "carol@example.org", "plan": "free", "country": "AT"}); rule != "paying" || bucket != "on" {
		t.Errorf("carol in AT gets rule %q, bucket %q; want rule paying, bucket on", rule, bucket)
	}
	b.checkConsole()
}
