package web_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// prereqApp makes gate (staff, by e-mail, get on; the ring serves off)
// and ui (on for everyone, fallback off).
func prereqApp(t *testing.T, b *browser) {
	t.Helper()
	ctx := context.Background()
	gate := feature.Feature{Key: "gate", Enabled: true, Salt: "gate", Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 0}},
		Rules: []feature.Rule{{Name: "staff", Conditions: []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}}, Serve: feature.Serve{Bucket: "on"}}}}
	ui := feature.Feature{Key: "ui", Enabled: true, Salt: "ui", Fallback: "off", Buckets: []feature.Bucket{{Name: "off", Replicas: 0}, {Name: "on", Replicas: 100}}}
	for _, f := range []feature.Feature{gate, ui} {
		if _, err := b.app.svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBrowserPrerequisites: the feature page's Prerequisites section sets
// them with a preview; its test-a-context box then explains an answer —
// the prerequisite that failed, the rules and conditions with why — and
// the "What does a user get?" page evaluates with the attributes it is
// given (rules and prerequisites), where it used to ignore them.
func TestBrowserPrerequisites(t *testing.T) {
	b := startBrowser(t)
	prereqApp(t, b)
	form := "form[data-prerequisites] "
	b.do(chromedp.Navigate(b.base+"/ui/features/ui#prerequisites"), waitFor("#no-prerequisites"), openAt("#prerequisites"),
		fill(form+"textarea[name=prerequisites]", "gate: on"),
		chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"))
	if got := b.text(form + ".preview"); !strings.Contains(got, "only when gate serves them on") {
		t.Errorf("preview %q", got)
	}
	var f struct {
		Version       int                    `json:"version"`
		Prerequisites []feature.Prerequisite `json:"prerequisites"`
	}
	if b.api("/api/features/ui", &f); f.Version != 1 {
		t.Fatalf("a preview changed the feature: version %d", f.Version)
	}
	b.do(chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="2"]`), waitFor(`.prerequisites-now li[data-prerequisite=gate]`))
	if b.api("/api/features/ui", &f); len(f.Prerequisites) != 1 || f.Prerequisites[0].Feature != "gate" || f.Prerequisites[0].Buckets[0] != "on" {
		t.Fatalf("after apply: %+v", f)
	}
	b.do(openAt(".prerequisites-now"))
	if got := b.text(".prerequisites-now"); got != "gate serves on" {
		t.Errorf("the section says %q", got)
	}

	// Test a context: not staff, so gate serves off and ui its fallback.
	test := "form[data-targeting=test] "
	b.do(openAt("form[data-targeting=test]"))
	b.do(fill(test+"[name=user]", "u1"), fill(test+".attr-row [name=attr-key]", "email"), fill(test+".attr-row [name=attr-value]", "Ann@Example.org"),
		chromedp.Click(chromedp.CSS(test+"button[type=submit]")), waitFor(test+".test-answer"))
	if got := evaluate[string](b, `document.querySelector('form[data-targeting=test] .test-answer').dataset.reason`); got != feature.ReasonPrerequisiteFailed {
		t.Errorf("test a context: reason %q", got)
	}
	if got := b.text(test + ".explain-prerequisite"); !strings.Contains(got, "gate serves off, not on") {
		t.Errorf("explanation of the prerequisite %q", got)
	}
	// On gate's own page, the rule's condition says why it failed.
	b.do(chromedp.Navigate(b.base+"/ui/features/gate#targeting"), waitFor(test+"[name=user]"), openAt("form[data-targeting=test]"),
		fill(test+"[name=user]", "u1"), fill(test+".attr-row [name=attr-key]", "email"), fill(test+".attr-row [name=attr-value]", "ann@example.org"),
		chromedp.Click(chromedp.CSS(test+"button[type=submit]")), waitFor(test+".explain-condition"))
	if got := b.text(test + ".explain-condition"); !strings.Contains(got, `email: "ann@example.org" not ends_with "@example.com"`) {
		t.Errorf("explanation of the condition %q", got)
	}
	if got := b.text(test + ".explain-ring"); !strings.Contains(got, "the ring places the user ID → off") {
		t.Errorf("explanation of the ring %q", got)
	}

	// What does a user get? With the attributes, the rules and the
	// prerequisite decide.
	for _, c := range []struct{ attrs, gate, ui, reason string }{
		{"email=ann@example.com", "on", "on", feature.ReasonRing},
		{"email=ann@example.org", "off", "off", feature.ReasonPrerequisiteFailed},
	} {
		b.do(chromedp.Navigate(b.base+"/ui/user?user=u1&attributes="+url.QueryEscape(c.attrs)), waitFor("#user-result"))
		if got := evaluate[string](b, `document.querySelector('tr[data-key=gate]').dataset.bucket`); got != c.gate {
			t.Errorf("%s: gate = %q, want %q", c.attrs, got, c.gate)
		}
		ui := evaluate[[]string](b, `(() => { const r = document.querySelector('tr[data-key=ui]'); return [r.dataset.bucket, r.dataset.reason] })()`)
		if ui[0] != c.ui || ui[1] != c.reason {
			t.Errorf("%s: ui = %v, want %s (%s)", c.attrs, ui, c.ui, c.reason)
		}
	}
	if got := b.text("tr[data-key=ui] .why"); !strings.Contains(got, "Prerequisite gate does not serve them a required bucket") {
		t.Errorf("why %q", got)
	}
}

// TestBrowserRuleNames: typing a new rule's name gives that name, not the
// suggestion with the typing appended; renaming a rule previews no
// population moving.
func TestBrowserRuleNames(t *testing.T) {
	b := startBrowser(t)
	prereqApp(t, b)
	rules := "form[data-targeting=rules] "
	b.do(chromedp.Navigate(b.base+"/ui/features/gate#targeting"), openAt("form[data-targeting=rules]"), waitFor(rules+".add-rule"),
		chromedp.Click(chromedp.CSS(rules+".add-rule")), waitFor(".rule-list li.rule:nth-child(2) [name=rule-name]"),
		chromedp.Click(chromedp.CSS(".rule-list li.rule:nth-child(2) [name=rule-name]")),
		chromedp.SendKeys(chromedp.CSS(".rule-list li.rule:nth-child(2) [name=rule-name]"), "beta"))
	if got := evaluate[string](b, `document.querySelector('.rule-list li.rule:nth-child(2) [name=rule-name]').value`); got != "beta" {
		t.Errorf("typed beta into a new rule's name: %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(".rule-list li.rule:nth-child(2) .remove-rule")))
	// Rename staff to employees: no one moves.
	b.do(fill(".rule-list li.rule:nth-child(1) [name=rule-name]", "employees"),
		chromedp.Click(chromedp.CSS(rules+"button[type=submit]")), waitFor(rules+".preview .apply"))
	if got := b.text(rules + ".preview"); !strings.Contains(got, "No user would change bucket") {
		t.Errorf("rename preview %q", got)
	}
}
