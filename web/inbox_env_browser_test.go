package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
)

// TestBrowserInboxEveryEnvironment: an editor's change in protected
// production waits as a request; an admin looking at staging is told of
// it in the header's inbox, whose page names its environment, and the
// approval applies it in production, not in the environment the page
// shows.
func TestBrowserInboxEveryEnvironment(t *testing.T) {
	a, envs, secrets := envApp(t, true)
	ctx := context.Background()
	prod, _ := envs.Service(rollout.Production)
	ten := 10
	res, err := prod.Change(ctx, "checkout", change.UpdateBucket("A", &ten, nil), rollout.ChangeOptions{Actor: "ed", Role: auth.RoleEditor})
	if err != nil || res.Request == nil {
		t.Fatalf("an editor's change in protected production = %+v, %v; want a request", res, err)
	}
	before, _ := prod.Snapshot().Feature("checkout")

	b := startBrowserOn(t, a)
	b.signIn(secrets["ada"])
	b.do(chromedp.Navigate(b.base+"/ui/?env=staging"), waitFor(`body[data-env="staging"] #inbox-count`))
	if got := b.text("#inbox-count"); got != "1" {
		t.Fatalf("the inbox in staging counts %q, want production's 1 request", got)
	}
	b.do(chromedp.Click(chromedp.CSS("#inbox-link")), waitFor("#request-"+res.Request.ID))
	if card := b.text("#request-" + res.Request.ID); !strings.Contains(card, "Production") {
		t.Errorf("the inbox's request reads %q, want its environment named", card)
	}
	b.do(chromedp.Click(chromedp.CSS("#request-"+res.Request.ID+" button.approve")), waitFor("#no-open-requests"))
	after, _ := prod.Snapshot().Feature("checkout")
	if after.Version != before.Version+1 {
		t.Fatalf("production's checkout at version %d after the approval, want %d", after.Version, before.Version+1)
	}
	if a, _ := after.Bucket("A"); a.Replicas != 10 {
		t.Errorf("production's A has %d replicas after the approval, want 10", a.Replicas)
	}
	b.checkConsole()
}
