package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/request"
)

// TestBrowserSubmitAndInbox: an editor's change above the churn limit,
// which they may not make alone, is submitted for approval from the same
// form and waits as a request; the header of another editor counts it in
// their inbox, whose page shows its preview, and they approve it there;
// the author's inbox does not count their own request, and a viewer has
// none. At 1280 and 390 px, light and dark.
func TestBrowserSubmitAndInbox(t *testing.T) {
	a, tokens, secrets := adminApp(t)
	_, carol, err := tokens.Create(context.Background(), "carol", auth.RoleEditor, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b := startBrowserOn(t, a)
	b.signIn(secrets["ed"])
	form := `form[data-kind="update-bucket"] `
	b.do(chromedp.Navigate(b.base+"/ui/features/checkout"), waitFor("#feature-key"), unfold("update-bucket"),
		chromedp.SetValue("#update-bucket", "A"), fill("#update-replicas", "30"),
		chromedp.Click(chromedp.CSS(form+"button[type=submit]")), waitFor(form+".preview .apply"))
	if got := b.text(form + ".preview .apply"); got != "Submit for approval" {
		t.Errorf("an editor's big change offers %q, want Submit for approval", got)
	}
	if got := b.text(form + ".preview .needs"); !strings.Contains(got, "waits as a request") {
		t.Errorf("the preview says %q", got)
	}
	b.screenshot("submit-preview-narrow", 390)
	b.confirmBig(form)
	b.do(chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor("li.request"))
	if got := evaluate[string](b, `location.pathname`); got != "/ui/requests" {
		t.Errorf("after submitting: %s, want the requests page", got)
	}
	open, err := a.svc.Requests(context.Background(), request.Query{State: request.Open})
	if err != nil || len(open) != 1 || open[0].Author != "ed" {
		t.Fatalf("open requests = %+v, %v; want ed's", open, err)
	}
	if f, _ := a.svc.Snapshot().Feature("checkout"); f.Version != 2 {
		t.Errorf("checkout at version %d after a submission, want 2 (unchanged)", f.Version)
	}
	if n := evaluate[int](b, `document.querySelectorAll('#inbox-count').length`); n != 0 {
		t.Error("the author's inbox counts their own request")
	}

	b.signIn(secrets["vera"])
	if n := evaluate[int](b, `document.querySelectorAll('#inbox-link').length`); n != 0 {
		t.Error("a viewer's header has an inbox")
	}

	b.signIn(carol)
	if got := b.text("#inbox-count"); got != "1" {
		t.Fatalf("carol's inbox counts %q, want 1", got)
	}
	b.do(chromedp.Click(chromedp.CSS("#inbox-link")), waitFor("#request-"+open[0].ID))
	card := b.text("#request-" + open[0].ID)
	if !strings.Contains(card, "of users would move") || !strings.Contains(card, "by ed") || !strings.Contains(card, "%") {
		t.Errorf("the inbox's request reads %q", card)
	}
	for _, width := range []int64{1280, 390} {
		b.do(chromedp.EmulateViewport(width, 900))
		if over := evaluate[bool](b, `document.documentElement.scrollWidth > innerWidth`); over {
			t.Errorf("the inbox overflows at %d px", width)
		}
	}
	b.screenshot("inbox-wide", 1280)
	b.screenshot("inbox-narrow", 390)
	b.dark()
	b.screenshot("inbox-dark-wide", 1280)
	b.screenshot("inbox-dark-narrow", 390)
	b.do(chromedp.Click(chromedp.CSS("#request-"+open[0].ID+" button.approve")), waitFor("#no-open-requests"))
	if f, _ := a.svc.Snapshot().Feature("checkout"); f.Version != 3 {
		t.Errorf("checkout at version %d after the approval, want 3", f.Version)
	}
	if n := evaluate[int](b, `document.querySelectorAll('#inbox-count').length`); n != 0 {
		open, _ := a.svc.Requests(context.Background(), request.Query{State: request.Open})
		t.Errorf("the inbox still counts a decided request: %q, %s; open %+v", b.text("#inbox-link"), evaluate[string](b, `location.href`), open)
	}
	b.checkConsole()
}
