package webhook_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/webhook"
)

// TestRequestEvents: a webhook that asks for request.created and
// request.decided gets, of all that happens, an editor's submitted
// request and its approval and rejection, each named by its event, with a
// text for a team's chat that says who asks for what, or who decided it.
func TestRequestEvents(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	db := openSQLite(t)
	svc := service(t, db, c)
	rcv := newReceiver(t, "s3cret-s3cret-s3cret")
	h, err := webhook.NewHook(rcv.srv.URL+"/slack", "s3cret-s3cret-s3cret", []string{webhook.RequestCreated, webhook.RequestDecided}, "admin", c.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateWebhook(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := webhook.NewHook(rcv.srv.URL, "s3cret-s3cret-s3cret", []string{"request.approved"}, "admin", c.Now()); err == nil ||
		!strings.Contains(err.Error(), "request.created") {
		t.Errorf("events [request.approved]: err = %v, want one naming the events there are", err)
	}
	createFeature(t, svc, "checkout")
	ed := rollout.ChangeOptions{Actor: "ann@example.com via sso", Role: auth.RoleEditor, Comment: "more treatment", Submit: true}
	five := 5
	big, err := svc.Change(ctx, "checkout", change.UpdateBucket("control", &five, nil), ed)
	if err != nil || big.Request == nil {
		t.Fatalf("editor's submitted change = %+v, %v; want a request", big, err)
	}
	if _, _, err := svc.ApproveRequest(ctx, big.Request.ID, "carol", "go"); err != nil {
		t.Fatal(err)
	}
	again, err := svc.Change(ctx, "checkout", change.Reshuffle("new"), ed)
	if err != nil || again.Request == nil {
		t.Fatalf("editor's submitted reshuffle = %+v, %v; want a request", again, err)
	}
	if _, err := svc.RejectRequest(ctx, again.Request.ID, "carol", "not now"); err != nil {
		t.Fatal(err)
	}
	w := webhook.New(db, webhook.Options{Clock: c.Now})
	for runOnce(t, w) > 0 {
	}
	got := rcv.deliveries()
	var names []string
	for _, g := range got {
		names = append(names, g.event.Name+"/"+string(g.event.Kind))
	}
	if strings.Join(names, " ") != "request.created/request_create request.decided/request_approve request.created/request_create request.decided/request_reject" {
		t.Fatalf("delivered %v, want the two requests' creation and decision only", names)
	}
	for i, want := range []string{
		`ann@example.com via sso asks for approval of a change to checkout: changed the share of control; control 53.68 % → 3 %`,
		`carol approved ann@example.com via sso's change to checkout, applied as version 2: changed the share of control; control 53.68 % → 3 %, treatment 46.32 % → 97 %; 50.67 % of users moved`,
		`ann@example.com via sso asks for approval of a change to checkout: reshuffled`,
		`carol rejected ann@example.com via sso's change to checkout: reshuffled`,
	} {
		if !strings.HasPrefix(got[i].event.Text, want) {
			t.Errorf("text %d = %q, want it to start %q", i, got[i].event.Text, want)
		}
	}
	if !strings.Contains(got[0].event.Text, "of users would move") || !strings.Contains(got[0].event.Text, `"more treatment"`) ||
		!strings.Contains(got[0].event.Text, "/ui/inbox") || !strings.Contains(got[3].event.Text, `"not now"`) {
		t.Errorf("texts %q, %q: want the share moved, the comments and where to decide", got[0].event.Text, got[3].event.Text)
	}
}
