package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/settings"
)

// TestBrowserAuditEveryKind: the audit log shows every kind of event the
// audit trail has — settings, segments, requests, archives, not only
// versions; its kind filter keeps one kind; its actor filter matches a
// part of the name ("carol" finds "ed, approved by carol"). At 1280 and
// 390 px, light and dark.
func TestBrowserAuditEveryKind(t *testing.T) {
	ctx := context.Background()
	b := startBrowser(t)
	a := b.app
	a.seed(t)
	if _, err := a.svc.UpdateSettings(ctx, settings.Settings{MaxChurn: 0.25, RequireApproval: settings.ApprovalPolicy{Features: []string{"checkout"}}}, 0, "ada", "checkout is live"); err != nil {
		t.Fatal(err)
	}
	staff := feature.Segment{Key: "staff", Conditions: []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}}}
	if _, err := a.svc.CreateSegment(ctx, staff, rollout.ChangeOptions{Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	six := 6
	res, err := a.svc.Change(ctx, "checkout", change.UpdateBucket("A", &six, nil), rollout.ChangeOptions{Actor: "ed", Role: auth.RoleEditor, Comment: "more A"})
	if err != nil || res.Request == nil {
		t.Fatalf("ed's change = %+v, %v; want a request", res, err)
	}
	if _, _, err := a.svc.ApproveRequest(ctx, res.Request.ID, "carol", "fine"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.svc.Archive(ctx, "dark-mode", rollout.ChangeOptions{Actor: "ed", Comment: "dark mode shipped"}); err != nil {
		t.Fatal(err)
	}
	kinds := func() string {
		return fmt.Sprint(evaluate[[]string](b, `[...document.querySelectorAll('li.change-entry')].map(li => li.dataset.kind + ':' + li.dataset.actor)`))
	}
	b.do(chromedp.Navigate(b.base+"/ui/changes"), waitFor("li.change-entry"))
	if got, want := kinds(), "[archive:ed request_approve:carol change:ed, approved by carol request_create:ed segment_create:ada settings:ada create:anonymous change:anonymous create:anonymous]"; got != want {
		t.Errorf("audit log = %s, want %s", got, want)
	}
	if got := b.text(`li.change-entry[data-kind="archive"]`); !strings.Contains(got, "dark mode shipped") || !strings.Contains(got, "archived") {
		t.Errorf("the archive's entry reads %q", got)
	}
	for _, width := range []int64{1280, 390} {
		b.do(chromedp.EmulateViewport(width, 900))
		if over := evaluate[bool](b, `document.documentElement.scrollWidth > innerWidth`); over {
			t.Errorf("the audit log overflows at %d px", width)
		}
	}
	b.screenshot("audit-kinds-wide", 1280)
	b.screenshot("audit-kinds-narrow", 390)

	// A part of a name, in any case, finds every event it is in.
	b.do(fill("#changes-actor", "CAROL"), chromedp.Click(chromedp.CSS(".filter-changes button[type=submit]")), waitFor(`#changes-actor[value="CAROL"]`))
	if got, want := kinds(), "[request_approve:carol change:ed, approved by carol]"; got != want {
		t.Errorf("audit log by carol = %s, want %s", got, want)
	}
	// One kind.
	evaluate[bool](b, `(document.getElementById('changes-actor').value = '', document.getElementById('changes-kind').value = 'archive', true)`)
	b.do(chromedp.Click(chromedp.CSS(".filter-changes button[type=submit]")), waitFor(`#changes-actor[value=""]`))
	if got, want := kinds(), "[archive:ed]"; got != want {
		t.Errorf("audit log of archives = %s, want %s", got, want)
	}
	if got := evaluate[string](b, `location.search`); got != "?feature=&kind=archive&actor=" {
		t.Errorf("the filter's URL = %q", got)
	}
	b.dark()
	b.screenshot("audit-kinds-dark-wide", 1280)
	b.screenshot("audit-kinds-dark-narrow", 390)
	// A kind that is not one is said, and everything shown.
	b.do(chromedp.Navigate(b.base+"/ui/changes?kind="+url.QueryEscape("<b>nope")), waitFor("li.change-entry"))
	if got := b.text(".filter-changes + .notice"); !strings.Contains(got, "There is no kind of event") {
		t.Errorf("a bad kind is told as %q", got)
	}
	b.checkConsole()
}
