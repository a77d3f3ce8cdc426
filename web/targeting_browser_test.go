package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

// elementShot saves the element sel at width, light or dark, as a PNG
// artifact.
func (b *browser) elementShot(name, sel string, width int64, dark bool) {
	b.t.Helper()
	scheme := "light"
	if dark {
		scheme = "dark"
	}
	b.do(chromedp.EmulateViewport(width, 900), func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return chromedp.Void{}, err
	})
	png, err := chromedp.Run(b.ctx, chromedp.Screenshot(chromedp.CSS(sel)))
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

// shots saves sel at 1280 and 390 px, light and dark.
func (b *browser) shots(name, sel string) {
	b.t.Helper()
	for _, dark := range []bool{false, true} {
		suffix := ""
		if dark {
			suffix = "-dark"
		}
		b.elementShot(name+"-wide"+suffix, sel, 1280, dark)
		b.elementShot(name+"-narrow"+suffix, sel, 390, dark)
	}
}

// postJSON posts body to the server and decodes its JSON answer.
func (b *browser) postJSON(path string, body, v any) int {
	b.t.Helper()
	data, _ := json.Marshal(body)
	res, err := http.Post(b.base+path, "application/json", bytes.NewReader(data))
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		b.t.Fatalf("POST %s: %v", path, err)
	}
	return res.StatusCode
}

type apiRules struct {
	Version  int            `json:"version"`
	Rules    []feature.Rule `json:"rules"`
	BucketBy string         `json:"bucket_by"`
}

// rulesOf is the feature's rules as the API gives them, as JSON.
func rulesJSON(t *testing.T, rules []feature.Rule) string {
	t.Helper()
	data, err := json.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestBrowserRules: on dark-mode, rules made in the editor ("in segment
// staff → on"; "country is one of DE, AT and app_version ≥ 4.2 → the
// ring, bucketed by organization_id"), previewed with the populations that
// change bucket, applied and read back through the API; then reordered,
// bucket_by changed, and contexts tested against the API's evaluation.
func TestBrowserRules(t *testing.T) {
	b := startBrowser(t)
	b.app.seed(t)
	ctx := context.Background()
	staff := feature.Segment{Key: "staff", Conditions: []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}}}
	if _, err := b.app.svc.CreateSegment(ctx, staff, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode#targeting"), waitFor("#no-rules"), openAt("form[data-targeting=rules]"), waitFor("form[data-targeting=rules] .add-rule"))
	// Every operator of the contract can be chosen, each with words.
	ops := evaluate[[]string](b, `(() => { document.querySelector('form[data-targeting=rules] .add-rule').click(); return [...document.querySelectorAll('.rule-list .cond select[name=op] option')].map(o => o.value + '=' + o.textContent); })()`)
	if len(ops) != len(feature.Operators) {
		t.Errorf("the operator menu has %d entries, want %d: %v", len(ops), len(feature.Operators), ops)
	}
	for i, op := range feature.Operators {
		if i < len(ops) && (!strings.HasPrefix(ops[i], op+"=") || strings.TrimPrefix(ops[i], op+"=") == "") {
			t.Errorf("operator %d = %q, want %s with a label", i, ops[i], op)
		}
	}

	// Rule 1: in segment staff → serve on.
	r1 := ".rule-list li.rule:nth-child(1) "
	b.do(
		fill(r1+"[name=rule-name]", "staff"),
		chromedp.SetValue(chromedp.CSS(r1+".cond [name=op]"), "in_segment"),
	)
	evaluate[bool](b, `(() => { const s = document.querySelector('.rule-list li.rule:nth-child(1) .cond [name=op]'); s.dispatchEvent(new Event('change', {bubbles: true})); return true })()`)
	b.do(chromedp.SetValue(chromedp.CSS(r1+"[name=serve]"), "bucket:on"))
	evaluate[bool](b, `(() => { document.querySelector('.rule-list li.rule:nth-child(1) [name=serve]').dispatchEvent(new Event('change', {bubbles: true})); return true })()`)
	if got := b.text(r1 + ".rule-sentence"); got != "If in segment staff → serve on" {
		t.Errorf("rule 1 reads %q", got)
	}

	// Rule 2: country is one of DE, AT and app_version ≥ 4.2 → the ring by organization_id.
	r2 := ".rule-list li.rule:nth-child(2) "
	b.do(chromedp.Click(chromedp.CSS("form[data-targeting=rules] .add-rule")), waitFor(r2+"[name=rule-name]"),
		fill(r2+"[name=rule-name]", "dach"),
		fill(r2+".cond:nth-child(1) [name=attribute]", "country"))
	setSelect(b, r2+".cond:nth-child(1) [name=op]", "in")
	b.do(fill(r2+".cond:nth-child(1) [name=value]", "DE, AT"),
		chromedp.Click(chromedp.CSS(r2+".add-cond")), waitFor(r2+".cond:nth-child(2) [name=attribute]"),
		fill(r2+".cond:nth-child(2) [name=attribute]", "app_version"))
	setSelect(b, r2+".cond:nth-child(2) [name=op]", "semver_gte")
	b.do(fill(r2+".cond:nth-child(2) [name=value]", "4.2"))
	setSelect(b, r2+"[name=serve]", "ring")
	b.do(waitFor(r2+".ring-by"), fill(r2+"[name=serve-by]", "organization_id"))
	if got, want := b.text(r2+".rule-sentence"), "If country is one of DE, AT and app_version ≥ 4.2 (semver) → serve the ring, bucketed by organization_id"; got != want {
		t.Errorf("rule 2 reads %q, want %q", got, want)
	}
	if got := b.text(r2 + ".cond:nth-child(2) .cond-lead"); got != "and" {
		t.Errorf("the second condition starts with %q, want and", got)
	}
	// A third rule, removed again.
	b.do(chromedp.Click(chromedp.CSS("form[data-targeting=rules] .add-rule")), waitFor(".rule-list li.rule:nth-child(3)"),
		chromedp.Click(chromedp.CSS(".rule-list li.rule:nth-child(3) .remove-rule")))
	if n := evaluate[int](b, `document.querySelectorAll('.rule-list li.rule').length`); n != 2 {
		t.Fatalf("%d rules after removing the third, want 2", n)
	}

	// The preview says which populations change bucket, each with an
	// estimate from the ring's evaluations of the last 24 hours (those
	// made here, and any the seed stored); nothing changes yet.
	before, err := b.app.svc.Exposures(ctx, "dark-mode")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12400 {
		if _, err := b.app.svc.Snapshot().Evaluate("dark-mode", fmt.Sprintf("estimate-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	form := "form[data-targeting=rules] "
	b.do(chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"))
	preview := b.text(form + ".preview")
	estimate := "≈ up to " + commas(before.LastDay+12400) + " evaluations a day"
	for _, want := range []string{"2 populations would change bucket",
		"users matching in segment staff: the ring → on " + estimate,
		"Each estimate is an upper bound",
		"The ring does not change"} {
		if !strings.Contains(preview, want) {
			t.Errorf("rules preview %q lacks %q", preview, want)
		}
	}
	b.shots("targeting-preview", "#targeting")
	// At 390 px nothing sticks out of its rule card or form.
	b.do(chromedp.EmulateViewport(390, 900))
	if out := evaluate[[]string](b, `[...document.querySelectorAll('#targeting input, #targeting select, #targeting button, #targeting p')].filter(e => e.offsetParent).filter(e => { const box = e.closest('li.rule, form, section').getBoundingClientRect(); const r = e.getBoundingClientRect(); return r.right > box.right + 0.5 || r.left < box.left - 0.5 }).map(e => e.outerHTML.slice(0, 80))`); len(out) > 0 {
		t.Errorf("at 390 px these stick out of their card: %q", out)
	}
	b.do(chromedp.EmulateViewport(1280, 900))
	var f apiRules
	if b.api("/api/features/dark-mode", &f); f.Version != 1 || len(f.Rules) != 0 {
		t.Fatalf("after the preview: version %d, rules %v; a preview must change nothing", f.Version, f.Rules)
	}
	b.do(chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="2"]`))
	if got := b.text("#banner h2"); got != "2 populations changed bucket" {
		t.Errorf("banner after the rules %q", got)
	}
	if got := b.text("#banner .populations"); !strings.Contains(got, "users matching in segment staff: the ring → on") {
		t.Errorf("banner's populations %q", got)
	}
	if got := b.text(`#history li[data-version="2"] .populations`); !strings.Contains(got, "users matching in segment staff: the ring → on") {
		t.Errorf("history's populations %q", got)
	}
	b.elementShot("targeting-banner-wide", "#banner", 1280, false)
	b.api("/api/features/dark-mode", &f)
	want := `[{"name":"staff","conditions":[{"op":"in_segment","value":"staff"}],"serve":{"bucket":"on"}},` +
		`{"name":"dach","conditions":[{"attribute":"country","op":"in","value":["DE","AT"]},{"attribute":"app_version","op":"semver_gte","value":"4.2"}],"serve":{"ring":true,"bucket_by":"organization_id"}}]`
	if got := rulesJSON(t, f.Rules); got != want {
		t.Errorf("stored rules\n%s\nwant\n%s", got, want)
	}
	if got := b.text(`.rules-now li[data-rule=dach]`); got != "dach If country is one of DE, AT and app_version ≥ 4.2 (semver) → serve the ring, bucketed by organization_id" {
		t.Errorf("the page says rule dach as %q", got)
	}

	// Reorder: dach first.
	b.do(openAt(form), waitFor(r1+".down"), chromedp.Click(chromedp.CSS(r1+".down")))
	if got := evaluate[[]string](b, `[...document.querySelectorAll('.rule-list [name=rule-name]')].map(i => i.value)`); !reflect.DeepEqual(got, []string{"dach", "staff"}) {
		t.Errorf("after moving staff down the editor has %v", got)
	}
	if up := evaluate[bool](b, `document.querySelector('.rule-list li.rule:nth-child(1) .up').disabled`); !up {
		t.Error("the first rule's up button is enabled")
	}
	b.do(chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"))
	if preview := b.text(form + ".preview"); !strings.Contains(preview, "After this, in order: dach") {
		t.Errorf("reorder preview %q", preview)
	}
	b.do(chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="3"]`))
	b.api("/api/features/dark-mode", &f)
	if len(f.Rules) != 2 || f.Rules[0].Name != "dach" || f.Rules[1].Name != "staff" {
		t.Errorf("after the reorder the API has %v", f.Rules)
	}

	// Drag staff back above dach, by its handle, and back again: the same
	// order as the arrows make.
	drag := func(from, to int, below bool) {
		t.Helper()
		evaluate[bool](b, fmt.Sprintf(`(() => {
			const cards = document.querySelectorAll('.rule-list li.rule');
			const src = cards[%d], dst = cards[%d];
			src.querySelector('.drag-handle').dispatchEvent(new PointerEvent('pointerdown', {bubbles: true}));
			const dt = new DataTransfer();
			src.dispatchEvent(new DragEvent('dragstart', {bubbles: true, dataTransfer: dt}));
			const box = dst.getBoundingClientRect();
			dst.dispatchEvent(new DragEvent('dragover', {bubbles: true, cancelable: true, dataTransfer: dt, clientY: %s}));
			dst.dispatchEvent(new DragEvent('drop', {bubbles: true, cancelable: true, dataTransfer: dt}));
			src.dispatchEvent(new DragEvent('dragend', {bubbles: true, dataTransfer: dt}));
			return true })()`, from, to, map[bool]string{true: "box.bottom - 2", false: "box.top + 2"}[below]))
	}
	names := func() []string {
		return evaluate[[]string](b, `[...document.querySelectorAll('.rule-list [name=rule-name]')].map(i => i.value)`)
	}
	b.do(openAt(".rule-list"))
	drag(1, 0, false)
	if got := names(); !reflect.DeepEqual(got, []string{"staff", "dach"}) {
		t.Errorf("after dragging staff above dach: %v", got)
	}
	if got := b.text(".rule-list li.rule:nth-child(1) .rule-n"); got != "Rule 1" {
		t.Errorf("the dragged card is numbered %q", got)
	}
	drag(0, 1, true)
	if got := names(); !reflect.DeepEqual(got, []string{"dach", "staff"}) {
		t.Errorf("after dragging staff below dach: %v", got)
	}

	// Test a context: the box answers as POST /evaluate does.
	type attr struct{ key, value, typ string }
	cases := []struct {
		user  string
		attrs []attr
	}{
		{"u1", []attr{{"email", "ann@example.com", "text"}}},
		{"u2", []attr{{"country", "DE", "text"}, {"app_version", "4.10.0", "text"}, {"organization_id", "acme", "text"}}},
		{"u3", []attr{{"country", "DE", "text"}, {"app_version", "4.1", "text"}}},
		{"u4", []attr{{"country", "FR", "text"}, {"seats", "12", "number"}, {"beta", "true", "bool"}, {"groups", "a, b", "list"}}},
		{"u5", nil},
	}
	b.do(openAt("form[data-targeting=test]"))
	for _, c := range cases {
		evaluate[bool](b, `(() => { const f = document.querySelector('form[data-targeting=test]'); f.querySelector('.attr-rows').replaceChildren(); f.querySelector('.test-result').hidden = true; return true })()`)
		b.do(fill("#test-user", c.user))
		ctxJSON := map[string]any{}
		for i, a := range c.attrs {
			row := fmt.Sprintf("form[data-targeting=test] .attr-rows li:nth-child(%d) ", i+1)
			b.do(chromedp.Click(chromedp.CSS("form[data-targeting=test] .add-attr")), waitFor(row+"[name=attr-key]"),
				fill(row+"[name=attr-key]", a.key), fill(row+"[name=attr-value]", a.value))
			setSelect(b, row+"[name=attr-type]", a.typ)
			switch a.typ {
			case "number":
				ctxJSON[a.key] = 12
			case "bool":
				ctxJSON[a.key] = true
			case "list":
				ctxJSON[a.key] = []string{"a", "b"}
			default:
				ctxJSON[a.key] = a.value
			}
		}
		b.do(chromedp.Click(chromedp.CSS("form[data-targeting=test] button[type=submit]")), waitFor("form[data-targeting=test] .test-answer"))
		got := evaluate[map[string]string](b, `(() => { const p = document.querySelector('.test-answer'); return {bucket: p.dataset.bucket, reason: p.dataset.reason, rule: p.dataset.rule, value: document.querySelector('.test-value').textContent} })()`)
		var api struct {
			Results map[string]struct {
				Bucket *string         `json:"bucket"`
				Value  json.RawMessage `json:"value"`
				Reason string          `json:"reason"`
				Rule   string          `json:"rule"`
			} `json:"results"`
		}
		if code := b.postJSON("/evaluate", map[string]any{"user": c.user, "context": ctxJSON, "features": []string{"dark-mode"}}, &api); code != http.StatusOK {
			t.Fatalf("POST /evaluate = %d", code)
		}
		r := api.Results["dark-mode"]
		bucket := ""
		if r.Bucket != nil {
			bucket = *r.Bucket
		}
		value := string(r.Value)
		if value == "" {
			value = "null"
		}
		if got["bucket"] != bucket || got["reason"] != r.Reason || got["rule"] != r.Rule || got["value"] != value {
			t.Errorf("user %s %v: the box says %v, POST /evaluate %s %s %s %s", c.user, c.attrs, got, bucket, r.Reason, r.Rule, value)
		}
	}
	if got := b.text(".test-answer"); !strings.HasPrefix(got, "User u5 gets") {
		t.Errorf("test answer %q", got)
	}
	// The cases cover a rule, the other rule's miss and the ring.
	b.do(fill("#test-user", "u1"))
	evaluate[bool](b, `(() => { const f = document.querySelector('form[data-targeting=test]'); f.querySelector('.attr-rows').replaceChildren(); return true })()`)
	b.do(chromedp.Click(chromedp.CSS("form[data-targeting=test] .add-attr")), waitFor("form[data-targeting=test] .attr-rows li [name=attr-key]"),
		fill("form[data-targeting=test] [name=attr-key]", "email"), fill("form[data-targeting=test] [name=attr-value]", "ann@example.com"),
		chromedp.Click(chromedp.CSS("form[data-targeting=test] button[type=submit]")), waitFor(".test-answer[data-rule=staff]"))
	if got := b.text(".test-answer"); got != "User u1 gets on: rule staff matched." {
		t.Errorf("test answer for staff %q", got)
	}
	b.shots("targeting", "#targeting")

	// bucket_by, previewed: every user is placed anew.
	bf := "form[data-targeting=bucket-by] "
	b.do(openAt(bf), fill("#bucket-by", "organization_id"), chromedp.Click(chromedp.CSS(bf+"button[type=submit]")), waitFor(bf+".preview .apply"))
	if got := b.text(bf + ".preview .outcome"); !strings.Contains(got, "of users expected to move: the ring places every user anew by the attribute organization_id") {
		t.Errorf("bucket_by preview %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(bf+".preview .apply")), waitFor(`#banner[data-version="4"]`))
	if b.api("/api/features/dark-mode", &f); f.BucketBy != "organization_id" {
		t.Errorf("bucket_by = %q after applying", f.BucketBy)
	}
	if got := b.text("#bucket-by-now"); got != "organization_id" {
		t.Errorf("the page says bucket by %q", got)
	}

	// A rule the server refuses: its words next to the form, nothing changed.
	r3 := ".rule-list li.rule:nth-child(3) "
	b.do(openAt(form), chromedp.Click(chromedp.CSS("form[data-targeting=rules] .add-rule")), waitFor(r3+"[name=rule-name]"),
		fill(r3+".cond [name=attribute]", "email"))
	setSelect(b, r3+".cond [name=op]", "matches")
	b.do(fill(r3+".cond [name=value]", "(unclosed"), chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".error:not([hidden])"))
	if got := b.text(form + ".error"); !strings.Contains(got, "(unclosed") {
		t.Errorf("refused rule says %q", got)
	}
	// And one the page refuses before asking: a condition without its attribute.
	b.do(fill(r3+".cond [name=attribute]", " "), chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".error:not([hidden])"))
	if got := b.text(form + ".error"); got != "Rule 3, condition 1: give the attribute, e.g. country." {
		t.Errorf("rule without attribute says %q", got)
	}
	if b.api("/api/features/dark-mode", &f); f.Version != 4 {
		t.Errorf("refused rules changed the feature to version %d", f.Version)
	}
	b.checkConsole()
}

// setSelect chooses value in the select sel, as a user's choice does.
func setSelect(b *browser, sel, value string) {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	v, _ := json.Marshal(value)
	if !evaluate[bool](b, `(() => { const s = document.querySelector(`+string(q)+`); s.value = `+string(v)+`; s.dispatchEvent(new Event('change', {bubbles: true})); return s.value === `+string(v)+` })()`) {
		b.t.Fatalf("select %s has no option %s", sel, value)
	}
}

// TestBrowserSegments: a segment created, changed and deleted from the
// segments page; its deletion while a feature uses it is refused with the
// feature's name, and nothing is deleted.
func TestBrowserSegments(t *testing.T) {
	b := startBrowser(t)
	b.app.seed(t)
	b.do(chromedp.Navigate(b.base+"/ui/"), waitFor(".top-nav"))
	b.do(chromedp.Click(chromedp.CSS(`.top-nav a[href="/ui/segments"]`)), waitFor("#no-segments"))

	create := "form[data-segment-form=create] "
	b.do(chromedp.Click(chromedp.CSS("#create-segment-box summary")), waitFor("#segment-key"),
		fill("#segment-key", "staff"), fill("#segment-description", "our people"),
		fill(create+".cond [name=attribute]", "email"))
	setSelect(b, create+".cond [name=op]", "ends_with")
	b.do(fill(create+".cond [name=value]", "@example.com"))
	if n := evaluate[int](b, `document.querySelectorAll('form[data-segment-form=create] option[value=in_segment]').length`); n != 0 {
		t.Errorf("a segment's conditions offer in_segment (%d)", n)
	}
	b.do(chromedp.Click(chromedp.CSS(create+"button[type=submit]")), waitFor(create+".preview .apply"))
	if got := b.text(create + ".preview .outcome"); got != "Creates segment staff: users whose email ends with @example.com (any case)." {
		t.Errorf("create preview %q", got)
	}
	var seg struct {
		Version    int                 `json:"version"`
		Conditions []feature.Condition `json:"conditions"`
		Features   []string            `json:"features"`
	}
	b.do(chromedp.Click(chromedp.CSS(create+".preview .apply")), waitFor(`li.segment[data-segment=staff]`))
	b.api("/api/segments/staff", &seg)
	if seg.Version != 1 || len(seg.Conditions) != 1 || string(seg.Conditions[0].Value) != `"@example.com"` {
		t.Errorf("created segment: %+v", seg)
	}
	if got := b.text(`li.segment[data-segment=staff] .seg-when`); got != "Users in it: email ends with @example.com (any case)" {
		t.Errorf("the page says %q", got)
	}

	// A feature uses it.
	rules := []feature.Rule{{Name: "staff", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"staff"`)}}, Serve: feature.Serve{Bucket: "on"}}}
	if _, err := b.app.svc.Change(context.Background(), "dark-mode", change.SetRules(rules), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Reload(), waitFor(`li.segment[data-segment=staff] .seg-used a`))
	if got := b.text(`li.segment[data-segment=staff] .seg-used`); got != "Used by dark-mode." {
		t.Errorf("used by %q", got)
	}

	// Edit: the preview names the features that get a new version.
	edit := `form[data-segment-form=edit][data-key=staff] `
	b.do(chromedp.Click(chromedp.CSS(`li.segment[data-segment=staff] .edit-box summary`)), waitFor(edit+".cond [name=value]"),
		fill(edit+".cond [name=value]", "@example.org"),
		chromedp.Click(chromedp.CSS(edit+".add-cond")), waitFor(edit+".cond:nth-child(2) [name=attribute]"),
		fill(edit+".cond:nth-child(2) [name=attribute]", "plan"))
	setSelect(b, edit+".cond:nth-child(2) [name=op]", "present")
	b.do(chromedp.Click(chromedp.CSS(edit+"button[type=submit]")), waitFor(edit+".preview .apply"))
	preview := b.text(edit + ".preview")
	for _, want := range []string{"Segment staff becomes: users whose email ends with @example.org (any case) and plan is present.", "dark-mode"} {
		if !strings.Contains(preview, want) {
			t.Errorf("edit preview %q lacks %q", preview, want)
		}
	}
	b.shots("segments-edit", "main")
	b.do(chromedp.EmulateViewport(390, 900))
	if out := evaluate[[]string](b, `[...document.querySelectorAll('main input, main select, main button, main p')].filter(e => e.offsetParent).filter(e => { const box = e.closest('form, li.segment, main').getBoundingClientRect(); const r = e.getBoundingClientRect(); return r.right > box.right + 0.5 || r.left < box.left - 0.5 }).map(e => e.outerHTML.slice(0, 80))`); len(out) > 0 {
		t.Errorf("at 390 px these stick out of the segments page's forms: %q", out)
	}
	b.do(chromedp.EmulateViewport(1280, 900))
	b.do(chromedp.Click(chromedp.CSS(edit + ".preview .apply")))
	b.do(chromedp.WaitReady(chromedp.CSS(`li.segment[data-segment=staff] .seg-history li[data-version="2"]`)))
	b.api("/api/segments/staff", &seg)
	if seg.Version != 2 || len(seg.Conditions) != 2 || seg.Conditions[1].Op != "present" {
		t.Errorf("edited segment: %+v", seg)
	}
	var fv struct {
		Versions []struct {
			Summary string `json:"summary"`
		} `json:"versions"`
	}
	b.api("/api/features/dark-mode/versions", &fv)
	if len(fv.Versions) == 0 || !strings.HasPrefix(fv.Versions[0].Summary, "segment staff changed") {
		t.Errorf("dark-mode's last version: %+v", fv.Versions)
	}

	// Delete while in use: refused, naming the feature.
	del := `form.segment-delete[data-key=staff] `
	b.do(chromedp.Click(chromedp.CSS(del+"button")), waitFor(del+"button[data-armed]"), chromedp.Click(chromedp.CSS(del+"button")), waitFor(del+".error:not([hidden])"))
	if got := b.text(del + ".error"); !strings.Contains(got, "in use by feature(s) dark-mode") {
		t.Errorf("refused deletion says %q", got)
	}
	b.api("/api/segments/staff", &seg)

	// A segment nobody uses is deleted.
	b.do(chromedp.Click(chromedp.CSS("#create-segment-box summary")), waitFor("#segment-key"),
		fill("#segment-key", "beta"), fill(create+".cond [name=attribute]", "groups"))
	setSelect(b, create+".cond [name=op]", "in")
	b.do(fill(create+".cond [name=value]", "beta, early"), chromedp.Click(chromedp.CSS(create+"button[type=submit]")), waitFor(create+".preview .apply"),
		chromedp.Click(chromedp.CSS(create+".preview .apply")), waitFor(`li.segment[data-segment=beta]`))
	b.shots("segments", "main")
	b.do(chromedp.Click(chromedp.CSS(`form.segment-delete[data-key=beta] button`)), waitFor(`form.segment-delete[data-key=beta] button[data-armed]`),
		chromedp.Click(chromedp.CSS(`form.segment-delete[data-key=beta] button`)), waitFor(`li.segment[data-segment=staff]`))
	b.do(chromedp.WaitNotPresent(chromedp.CSS(`li.segment[data-segment=beta]`)))
	res, err := http.Get(b.base + "/api/segments/beta")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("GET beta after deleting = %d", res.StatusCode)
	}
	b.checkConsole()
}

// TestBrowserTargetingViewer: signed in as a viewer, the feature page says
// the rules and tests contexts, with no editor; the segments page lists the
// segments with no form.
func TestBrowserTargetingViewer(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tokens, err := auth.NewTokens(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := tokens.Create(ctx, "vera", auth.RoleViewer, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	access := api.NewAuth(tokens, nil)
	e := api.New(svc, api.Options{Auth: access, Plans: testPlanLimits, Routes: web.Routes(svc, web.Options{Sessions: access})})
	a := &app{e: e, svc: svc, db: db}
	a.seed(t)
	staff := feature.Segment{Key: "staff", Conditions: []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}}}
	if _, err := svc.CreateSegment(ctx, staff, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	rules := []feature.Rule{{Name: "staff", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"staff"`)}}, Serve: feature.Serve{Bucket: "on"}}}
	if _, err := svc.Change(ctx, "dark-mode", change.SetRules(rules), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	b := startBrowserOn(t, a)
	b.do(chromedp.Navigate(b.base+"/ui/login"), waitFor("#token"), fill("#token", secret), chromedp.Submit(chromedp.CSS("#token")), waitFor("#who"))
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode#targeting"), waitFor(`.rules-now li[data-rule=staff]`))
	if n := evaluate[int](b, `document.querySelectorAll('form[data-targeting=rules], form[data-targeting=bucket-by]').length`); n != 0 {
		t.Errorf("a viewer's page has %d targeting editors", n)
	}
	b.do(openAt("form[data-targeting=test]"), fill("#test-user", "u1"), fill("form[data-targeting=test] [name=attr-key]", "email"), fill("form[data-targeting=test] [name=attr-value]", "bo@example.com"),
		chromedp.Click(chromedp.CSS("form[data-targeting=test] button[type=submit]")), waitFor(".test-answer"))
	if got := b.text(".test-answer"); got != "User u1 gets on: rule staff matched." {
		t.Errorf("a viewer's test says %q", got)
	}
	b.do(chromedp.Navigate(b.base+"/ui/segments"), waitFor(`li.segment[data-segment=staff]`))
	if n := evaluate[int](b, `document.querySelectorAll('form').length`); n != 1 { // sign out
		t.Errorf("a viewer's segments page has %d forms, want only the sign-out one", n)
	}
	if got := b.text("#read-only"); !strings.Contains(got, "you can read segments but not change them") {
		t.Errorf("read-only line %q", got)
	}
	b.checkConsole()
}

// commas writes n with commas between groups of three digits.
func commas(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
