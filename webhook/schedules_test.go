package webhook_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/schedule"
	"github.com/rollout/rollout/webhook"
)

// TestScheduleEvents: a webhook that asks for schedule.applied and
// schedule.failed gets, of all that happens, a scheduled change applied at
// its time and another that failed then, each named by its event, the
// failure with its reason.
func TestScheduleEvents(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	db := openSQLite(t)
	svc := service(t, db, c)
	rcv := newReceiver(t, "s3cret-s3cret-s3cret")
	h, err := webhook.NewHook(rcv.srv.URL, "s3cret-s3cret-s3cret", []string{webhook.ScheduleApplied, webhook.ScheduleFailed}, "admin", c.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateWebhook(ctx, h); err != nil {
		t.Fatal(err)
	}
	createFeature(t, svc, "banner")
	scheduleAt := func(body string) {
		t.Helper()
		sp := schedule.Spec{At: c.Now().Add(time.Hour), Change: schedule.Change{Kind: schedule.KindPatch, Body: json.RawMessage(body)}}
		if _, err := svc.CreateSchedule(ctx, "banner", sp, api.ScheduledChange, "ann"); err != nil {
			t.Fatal(err)
		}
	}
	scheduleAt(`{"enabled":false}`)
	scheduleAt(`{"fallback":"treatment"}`)
	if _, err := svc.Change(ctx, "banner", change.RemoveBucket("treatment"), rollout.ChangeOptions{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Hour)
	if n, err := svc.ApplyDueSchedules(ctx, api.ScheduledChange); n != 1 || err != nil {
		t.Fatalf("ApplyDueSchedules = %d, %v; want 1 applied", n, err)
	}
	w := webhook.New(db, webhook.Options{Clock: c.Now})
	for runOnce(t, w) > 0 {
	}
	got := rcv.deliveries()
	// Both were due at once: either may go first.
	slices.SortFunc(got, func(a, b received) int { return strings.Compare(a.event.Name, b.event.Name) })
	var names []string
	for _, g := range got {
		names = append(names, g.event.Name+"/"+string(g.event.Kind))
	}
	if strings.Join(names, " ") != "schedule.applied/schedule_apply schedule.failed/schedule_fail" {
		t.Fatalf("delivered %v, want the applied and the failed schedule only", names)
	}
	if text := got[1].event.Text; !strings.Contains(text, "failed") || !strings.Contains(text, `"treatment"`) {
		t.Errorf("failure's text %q, want the reason, naming the missing bucket", text)
	}
	if got[0].event.Actor != schedule.Actor || got[0].event.Version != 3 {
		t.Errorf("applied event %+v, want version 3 by %s", got[0].event, schedule.Actor)
	}
}
