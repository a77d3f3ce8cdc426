package web_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// TestBrowserUserLists: on the segments page an editor pastes user IDs,
// one per line (blank lines and repeats ignored), to create a user list;
// the page shows its size, never its IDs; adding, removing and replacing
// users is previewed with the users who enter and leave the list and the
// features that get a new version, then applied; a listed user is then
// served the list's rule.
func TestBrowserUserLists(t *testing.T) {
	b := startBrowser(t)
	b.app.seed(t)
	b.do(chromedp.Navigate(b.base+"/ui/segments"), waitFor("#no-segments"))

	create := "form[data-list-form=create] "
	b.do(chromedp.Click(chromedp.CSS("#create-list-box summary")), waitFor("#list-key"),
		fill("#list-key", "beta"), fill("#list-description", "early testers"),
		fill("#list-users", "ann\nbob\n\n  carol  \nbob\n"),
		chromedp.Click(chromedp.CSS(create+"button[type=submit]")), waitFor(create+".preview .apply"))
	if got := b.text(create + ".preview .outcome"); got != "Creates user list beta of 3 users." {
		t.Errorf("create preview %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(create+".preview .apply")), waitFor(`li.segment[data-segment=beta] .list-size`))
	if got := b.text(`li.segment[data-segment=beta] .list-size`); got != "A user list: 3 listed users" {
		t.Errorf("the page says %q", got)
	}
	if html := evaluate[string](b, `document.querySelector('li.segment[data-segment=beta]').outerHTML`); strings.Contains(html, "carol") {
		t.Errorf("the segments page shows a listed user's ID: %s", html)
	}

	// A feature uses it.
	rules := []feature.Rule{{Name: "beta", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"beta"`)}}, Serve: feature.Serve{Bucket: "on"}}}
	if _, err := b.app.svc.Change(context.Background(), "dark-mode", change.SetRules(rules), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Reload(), waitFor(`li.segment[data-segment=beta] .seg-used a`))

	edit := `form[data-list-form=edit][data-key=beta] `
	submit := func(mode, ids, wantPreview string, wantSize int) {
		t.Helper()
		b.do(chromedp.Click(chromedp.CSS(`li.segment[data-segment=beta] .edit-box summary`)), waitFor(edit+"textarea"))
		setSelect(b, edit+"[name=mode]", mode)
		b.do(fill(edit+"textarea", ids), chromedp.Click(chromedp.CSS(edit+"button[type=submit]")), waitFor(edit+".preview .apply"))
		preview := b.text(edit + ".preview")
		for _, want := range []string{wantPreview, "dark-mode"} {
			if !strings.Contains(preview, want) {
				t.Errorf("%s preview %q lacks %q", mode, preview, want)
			}
		}
		if mode == "add" {
			b.shots("userlist-edit", "main")
			b.do(chromedp.EmulateViewport(1280, 900))
		}
		b.do(waitFor(edit+".preview .apply"), chromedp.Click(chromedp.CSS(edit+".preview .apply")))
		b.do(chromedp.WaitReady(chromedp.CSS(`li.segment[data-segment=beta] .list-size[data-size="` + strconv.Itoa(wantSize) + `"]`)))
	}
	submit("add", "dave\nann\nerin", "User list beta: 2 added, 0 removed; it will hold 5 users.", 5)
	submit("remove", "bob\nzed", "User list beta: 0 added, 1 removed; it will hold 4 users.", 4)
	submit("replace", "erin\nfrank", "User list beta: 1 added, 3 removed; it will hold 2 users.", 2)

	l := b.app.svc.Snapshot().CompiledSegments()["beta"].Users()
	for user, want := range map[string]bool{"erin": true, "frank": true, "ann": false, "bob": false, "dave": false} {
		if l.Has(user) != want {
			t.Errorf("after the edits, %s listed: %v, want %v", user, l.Has(user), want)
		}
	}
	if e, err := b.app.svc.Snapshot().Evaluate("dark-mode", "frank"); err != nil || e.Rule != "beta" {
		t.Errorf("frank, listed, is served %+v, %v; want the rule beta", e, err)
	}
	var vs struct {
		Versions []struct {
			Summary string `json:"summary"`
		} `json:"versions"`
	}
	b.api("/api/segments/beta/versions", &vs)
	if len(vs.Versions) != 4 || !strings.Contains(vs.Versions[0].Summary, "1 added, 3 removed") {
		t.Errorf("the list's history: %+v", vs.Versions)
	}

	// A mistake is said, and changes nothing.
	b.do(chromedp.Click(chromedp.CSS(`li.segment[data-segment=beta] .edit-box summary`)), waitFor(edit+"textarea"))
	setSelect(b, edit+"[name=mode]", "add")
	b.do(fill(edit+"textarea", strings.Repeat("x", feature.MaxUserBytes+1)), chromedp.Click(chromedp.CSS(edit+"button[type=submit]")), waitFor(edit+".error:not([hidden])"))
	if got := b.text(edit + ".error"); !strings.Contains(got, "must be 1 to 256 bytes") {
		t.Errorf("an ID too long says %q", got)
	}
	b.checkConsole()
}
