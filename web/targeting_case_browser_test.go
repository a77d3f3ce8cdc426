package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// TestBrowserRuleIgnoreCase: the rule form offers "ignore case" on the
// operators that take it, ticked by itself for an e-mail-like attribute
// and not for others; what is applied is stored with ignore_case, says
// "(any case)", and evaluates bob@Example.COM as ending with
// @example.com. An any-of condition and a split made through the API are
// kept as they are when the form applies other edits.
func TestBrowserRuleIgnoreCase(t *testing.T) {
	b := startBrowser(t)
	b.app.seed(t)
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode#targeting"), openAt("form[data-targeting=rules]"), waitFor("form[data-targeting=rules] .add-rule"),
		chromedp.Click(chromedp.CSS("form[data-targeting=rules] .add-rule")))
	r1 := ".rule-list li.rule:nth-child(1) "
	c1, c2 := r1+".cond:nth-child(1) ", r1+".cond:nth-child(2) "
	b.do(fill(r1+"[name=rule-name]", "staff"), fill(c1+"[name=attribute]", "email"))
	setSelect(b, c1+"[name=op]", "ends_with")
	b.do(fill(c1+"[name=value]", "@Example.com"))
	checked := func(sel string) bool {
		q, _ := json.Marshal(sel + "[name=ignore_case]")
		return evaluate[bool](b, `document.querySelector(`+string(q)+`).checked`)
	}
	if !checked(c1) {
		t.Errorf("ignore case is not ticked for attribute email")
	}
	b.do(chromedp.Click(chromedp.CSS(r1+".add-cond")), waitFor(c2+"[name=attribute]"), fill(c2+"[name=attribute]", "country"))
	setSelect(b, c2+"[name=op]", "in")
	b.do(fill(c2+"[name=value]", "DE, AT"))
	if checked(c2) {
		t.Errorf("ignore case is ticked for attribute country")
	}
	// Operators that do not take it hide it.
	setSelect(b, c2+"[name=op]", "gt")
	if evaluate[bool](b, `!document.querySelector('.rule-list li.rule:nth-child(1) .cond:nth-child(2) .fold-label').hidden`) {
		t.Errorf("ignore case is offered for gt")
	}
	setSelect(b, c2+"[name=op]", "in")
	setSelect(b, r1+"[name=serve]", "bucket:on")
	if got, want := b.text(r1+".rule-sentence"), "If email ends with @Example.com (any case) and country is one of DE, AT → serve on"; got != want {
		t.Errorf("rule reads %q, want %q", got, want)
	}
	form := "form[data-targeting=rules] "
	b.do(chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"),
		chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="2"]`))
	var f apiRules
	b.api("/api/features/dark-mode", &f)
	want := `[{"name":"staff","conditions":[{"attribute":"email","op":"ends_with","value":"@Example.com","ignore_case":true},{"attribute":"country","op":"in","value":["DE","AT"]}],"serve":{"bucket":"on"}}]`
	if got := rulesJSON(t, f.Rules); got != want {
		t.Errorf("stored rules\n%s\nwant\n%s", got, want)
	}
	var answer struct {
		Results map[string]struct {
			Bucket string `json:"bucket"`
			Rule   string `json:"rule"`
		} `json:"results"`
	}
	b.postJSON("/evaluate", map[string]any{"user": "bob", "features": []string{"dark-mode"}, "context": map[string]any{"email": "bob@EXAMPLE.COM", "country": "DE"}}, &answer)
	ev := answer.Results["dark-mode"]
	if ev.Rule != "staff" || ev.Bucket != "on" {
		t.Errorf("bob@EXAMPLE.COM gets %+v, want rule staff, bucket on", ev)
	}

	// An any-of rule made through the API survives an edit of another rule.
	anyRule := feature.Rule{Name: "paying", Conditions: []feature.Condition{{Any: []feature.Condition{
		{Attribute: "plan", Op: "eq", Value: json.RawMessage(`"enterprise"`)},
		{Attribute: "email", Op: "ends_with", Value: json.RawMessage(`"@example.org"`), IgnoreCase: true},
	}}}, Serve: feature.Serve{Bucket: "on"}}
	if _, err := b.app.svc.Change(context.Background(), "dark-mode", change.SetRules(append(f.Rules, anyRule)), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}

	// (A query, so that the browser loads the page again rather than move
	// to its fragment.)
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode?again=1#targeting"), openAt("form[data-targeting=rules]"), waitFor(".rule-list li.rule:nth-child(2) .cond-any"))
	if got := b.text(".rule-list li.rule:nth-child(2) .cond-any"); got != "(plan equals enterprise or email ends with @example.org (any case))" {
		t.Errorf("the any-of condition reads %q", got)
	}
	b.do(fill(r1+"[name=rule-name]", "staff2"),
		chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"),
		chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="4"]`))
	b.api("/api/features/dark-mode", &f)
	if len(f.Rules) != 2 || f.Rules[0].Name != "staff2" || !strings.Contains(rulesJSON(t, f.Rules[1:]), `"any":[{"attribute":"plan","op":"eq","value":"enterprise"},{"attribute":"email","op":"ends_with","value":"@example.org","ignore_case":true}]`) {
		t.Errorf("after editing rule 1 the rules are %s", rulesJSON(t, f.Rules))
	}

	// A rule's split (made through the API) is said, and kept with its
	// planned ring while another rule is edited.
	split := feature.Rule{Name: "ab", Conditions: []feature.Condition{{Attribute: "plan", Op: "eq", Value: json.RawMessage(`"pro"`)}}, Serve: feature.Serve{Split: map[string]float64{"off": 0.5, "on": 0.5}}}
	res, err := b.app.svc.Change(context.Background(), "dark-mode", change.SetRules(append(f.Rules, split)), rollout.ChangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ring := rulesJSON(t, res.Feature.Rules[2:])
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode?split=1#targeting"), openAt("form[data-targeting=rules]"), waitFor(".rule-list li.rule:nth-child(3) .rule-sentence"))
	if got := b.text(".rule-list li.rule:nth-child(3) .rule-sentence"); got != "If plan equals pro → serve a split: off 50 %, on 50 %" {
		t.Errorf("the split rule reads %q", got)
	}
	if got := b.text(`.rules-now li[data-rule=ab]`); !strings.Contains(got, "a split: off 50 %, on 50 %") {
		t.Errorf("the page says rule ab as %q", got)
	}
	b.do(fill(r1+"[name=rule-name]", "staff3"),
		chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"),
		chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="6"]`))
	b.api("/api/features/dark-mode", &f)
	if len(f.Rules) != 3 || f.Rules[0].Name != "staff3" || rulesJSON(t, f.Rules[2:]) != ring {
		t.Errorf("after editing rule 1 the split rule is %s, want %s", rulesJSON(t, f.Rules[2:]), ring)
	}
	b.checkConsole()
}
