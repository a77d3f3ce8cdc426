package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/webhook"
)

func newHook(t *testing.T, s Store, events []string, now time.Time) webhook.Hook {
	t.Helper()
	h, err := webhook.NewHook("http://127.0.0.1:9/hook", "0123456789abcdef", events, "admin", now)
	if err != nil {
		t.Fatal(err)
	}
	h, err = s.CreateWebhook(context.Background(), h)
	if err != nil {
		t.Fatalf("CreateWebhook = %v", err)
	}
	return h
}

func claim(t *testing.T, s Store, owner string, now time.Time, limit int) []webhook.Claim {
	t.Helper()
	cs, err := s.ClaimWebhooks(context.Background(), owner, now, time.Minute, limit)
	if err != nil {
		t.Fatalf("ClaimWebhooks(%s) = %v", owner, err)
	}
	return cs
}

// claimed returns "hook event-kind feature" of each claim.
func claimed(cs []webhook.Claim) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s %s %s", c.Hook.URL, c.Event.Kind, c.Event.Feature))
	}
	return out
}

// testWebhooks: a webhook receives the events after its creation, its own
// creation first; claims lease it to one owner until the lease runs out;
// an outcome moves its cursor, or counts a failure and backs off, or
// pauses it with an audit event; resume and delete are audited; the log
// keeps the latest attempts.
// answer500 is what a failing endpoint answered: lines of its own words.
const answer500 = "internal error\nat /services/T1/B1/x"

func testWebhooks(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	create(t, s, newFeature("before")) // before the webhook: never sent
	h := newHook(t, s, []string{"*"}, now)
	if h.Cursor == 0 {
		t.Fatalf("CreateWebhook cursor = 0, want the last event's ID")
	}
	create(t, s, newFeature("after"))

	got, err := s.Webhook(ctx, h.ID)
	if err != nil || got.Secret != "0123456789abcdef" || got.State != webhook.Active || got.URL != h.URL {
		t.Fatalf("Webhook(%s) = %+v, %v", h.ID, got, err)
	}
	wantCode(t, "Webhook(missing)", func() error { _, err := s.Webhook(ctx, "nope"); return err }(), feature.ENotFound)

	// One owner at a time, from another handle too.
	other := o.Open(t)
	cs := claim(t, s, "a", now, 10)
	if diff := cmp.Diff([]string{h.URL + " webhook_create "}, claimed(cs)); diff != "" {
		t.Fatalf("claims of a (-want +got):\n%s", diff)
	}
	if cs := claim(t, other, "b", now.Add(59*time.Second), 10); len(cs) != 0 {
		t.Fatalf("claims of b within a's lease = %v, want none", claimed(cs))
	}
	// a's lease runs out: b takes the webhook, and a can no longer record.
	later := now.Add(2 * time.Minute)
	cs = claim(t, other, "b", later, 10)
	if len(cs) != 1 || cs[0].Event.Kind != audit.WebhookCreate {
		t.Fatalf("claims of b after a's lease = %v", claimed(cs))
	}
	ok := finish(t, s, "a", cs[0], webhook.Delivery{Status: 200}, later)
	if ok {
		t.Fatalf("FinishWebhook by a after its lease was taken = true, want false")
	}
	if !finish(t, other, "b", cs[0], webhook.Delivery{Status: 200}, later) {
		t.Fatalf("FinishWebhook by b = false, want true")
	}
	// Next: the feature made after the webhook.
	cs = claim(t, s, "a", later, 10)
	if diff := cmp.Diff([]string{h.URL + " create after"}, claimed(cs)); diff != "" {
		t.Fatalf("claims (-want +got):\n%s", diff)
	}
	// Failures back off, the tenth pauses.
	at := later
	for i := 1; i <= webhook.MaxFailures; i++ {
		if i > 1 {
			if cs := claim(t, s, "a", at.Add(-time.Second), 10); len(cs) != 0 {
				t.Fatalf("attempt %d claimed before its backoff ran out", i)
			}
			cs = claim(t, s, "a", at, 10)
		}
		if len(cs) != 1 || cs[0].Event.Feature != "after" || cs[0].Hook.Failures != i-1 {
			t.Fatalf("attempt %d: claims %v (failures %v)", i, claimed(cs), cs)
		}
		if !finish(t, s, "a", cs[0], webhook.Delivery{Status: 500, Error: "HTTP 500", Detail: answer500}, at) {
			t.Fatalf("attempt %d not recorded", i)
		}
		at = at.Add(webhook.Backoff(i))
	}
	got, err = s.Webhook(ctx, h.ID)
	if err != nil || got.State != webhook.Paused || got.PausedReason == "" || got.Failures != webhook.MaxFailures {
		t.Fatalf("after %d failures: %+v, %v", webhook.MaxFailures, got, err)
	}
	if cs := claim(t, s, "a", at.Add(time.Hour), 10); len(cs) != 0 {
		t.Fatalf("a paused webhook was claimed: %v", claimed(cs))
	}
	paused := wantKinds(t, s, audit.Query{Kind: audit.WebhookPaused}, "webhook_paused "+h.ID)
	if paused[0].Actor != "webhook delivery" {
		t.Errorf("paused event actor = %q", paused[0].Actor)
	}
	log, err := s.WebhookDeliveries(ctx, h.ID, 0)
	if err != nil || len(log) != webhook.MaxFailures+2 { // a's late record is logged too
		t.Fatalf("WebhookDeliveries = %d entries, %v; want %d", len(log), err, webhook.MaxFailures+2)
	}
	if log[0].Attempt != webhook.MaxFailures || log[0].Status != 500 || log[0].EventKind != audit.Create || log[0].OK() {
		t.Errorf("latest delivery = %+v", log[0])
	}
	// The log keeps the endpoint's answer apart from the reason; the
	// pause, which viewers and other webhooks read, says the reason alone.
	if log[0].Error != "HTTP 500" || log[0].Detail != answer500 {
		t.Errorf("latest delivery's error %q and detail %q, want %q and %q", log[0].Error, log[0].Detail, "HTTP 500", answer500)
	}
	if !strings.Contains(paused[0].Summary, "HTTP 500") || strings.Contains(paused[0].Summary, "internal") || strings.Contains(got.PausedReason, "internal") {
		t.Errorf("paused event %q, reason %q: want the reason HTTP 500 without the endpoint's answer", paused[0].Summary, got.PausedReason)
	}

	wantCode(t, "ResumeWebhook(active)", s.ResumeWebhook(ctx, "nope", "admin", at), feature.ENotFound)
	if err := s.ResumeWebhook(ctx, h.ID, "admin", at); err != nil {
		t.Fatalf("ResumeWebhook = %v", err)
	}
	wantCode(t, "ResumeWebhook(again)", s.ResumeWebhook(ctx, h.ID, "admin", at), feature.EConflict)
	cs = claim(t, s, "a", at, 10) // the same event again, no failures
	if len(cs) != 1 || cs[0].Event.Feature != "after" || cs[0].Hook.Failures != 0 {
		t.Fatalf("after resume: %v", cs)
	}
	finish(t, s, "a", cs[0], webhook.Delivery{Status: 204}, at)
	// Then its own pause, its resume: it receives every event.
	cs = claim(t, s, "a", at, 10)
	if len(cs) != 1 || cs[0].Event.Kind != audit.WebhookPaused {
		t.Fatalf("next claim = %v", claimed(cs))
	}
	finish(t, s, "a", cs[0], webhook.Delivery{Status: 204}, at)

	// A filtered webhook skips what it does not want.
	only := newHook(t, s, []string{"archive"}, at)
	create(t, s, newFeature("skipped"))
	for _, c := range claim(t, s, "a", at, 10) {
		if c.Hook.ID == only.ID {
			t.Fatalf("webhook for archive events got %s", c.Event.Kind)
		}
	}
	got, _ = s.Webhook(ctx, only.ID)
	last := events(t, s, audit.Query{Limit: 1})
	if got.Cursor != last[0].ID {
		t.Errorf("filtered webhook's cursor = %d, want past the skipped events at %d", got.Cursor, last[0].ID)
	}

	hooks, err := s.Webhooks(ctx)
	if err != nil || len(hooks) != 2 || hooks[0].ID != h.ID {
		t.Fatalf("Webhooks = %v, %v", hooks, err)
	}
	if err := s.DeleteWebhook(ctx, h.ID, "admin", at); err != nil {
		t.Fatalf("DeleteWebhook = %v", err)
	}
	wantCode(t, "DeleteWebhook(again)", s.DeleteWebhook(ctx, h.ID, "admin", at), feature.ENotFound)
	if log, err := s.WebhookDeliveries(ctx, h.ID, 0); err != nil || len(log) != 0 {
		t.Errorf("log of a deleted webhook = %v, %v", log, err)
	}
	wantKinds(t, s, audit.Query{Actor: "admin", Ascending: true},
		"webhook_create "+h.ID, "webhook_resume "+h.ID, "webhook_create "+only.ID, "webhook_delete "+h.ID)
}

func finish(t *testing.T, s Store, owner string, c webhook.Claim, d webhook.Delivery, now time.Time) bool {
	t.Helper()
	ok, err := s.FinishWebhook(context.Background(), owner, c.Hook.ID, c.Hook.Outcome(c.Event, d, now))
	if err != nil {
		t.Fatalf("FinishWebhook = %v", err)
	}
	return ok
}

// testWebhookLimits: at most MaxWebhooks; the log keeps the latest
// WebhookDeliveryKept attempts.
func testWebhookLimits(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var h webhook.Hook
	for range webhook.MaxHooks {
		h = newHook(t, s, nil, now)
	}
	extra, _ := webhook.NewHook("https://example.invalid/x", "0123456789abcdef", nil, "admin", now)
	_, err := s.CreateWebhook(ctx, extra)
	wantCode(t, "CreateWebhook(over the limit)", err, feature.EConflict)
	for i := range webhook.DeliveryKept + 5 {
		o := h.Outcome(audit.Event{ID: int64(i + 1), Kind: audit.Change}, webhook.Delivery{Status: 200}, now)
		if _, err := s.FinishWebhook(ctx, "nobody", h.ID, o); err != nil {
			t.Fatal(err)
		}
	}
	log, err := s.WebhookDeliveries(ctx, h.ID, 0)
	if err != nil || len(log) != webhook.DeliveryKept || log[0].EventID != int64(webhook.DeliveryKept+5) {
		t.Fatalf("WebhookDeliveries = %d entries (newest %v), %v; want %d", len(log), log[:1], err, webhook.DeliveryKept)
	}
	got, _ := s.Webhook(ctx, h.ID)
	if got.Cursor != h.Cursor {
		t.Errorf("an outcome without the lease moved the cursor to %d", got.Cursor)
	}
}

// testWebhookClaimsRace: owners claiming at once, on two handles, never
// hold one webhook together.
func testWebhookClaimsRace(t *testing.T, o Opened) {
	s, other := o.Store, o.Open(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for range 8 {
		newHook(t, s, nil, now)
	}
	var (
		mu   sync.Mutex
		seen = map[string]string{}
		wg   sync.WaitGroup
	)
	for i, st := range []Store{s, other, s, other} {
		owner := fmt.Sprintf("owner%d", i)
		wg.Go(func() {
			cs, err := st.ClaimWebhooks(context.Background(), owner, now, time.Minute, 3)
			if err != nil {
				t.Errorf("ClaimWebhooks(%s) = %v", owner, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, c := range cs {
				if prev, ok := seen[c.Hook.ID]; ok {
					t.Errorf("webhook %s claimed by %s and %s", c.Hook.ID, prev, owner)
				}
				seen[c.Hook.ID] = owner
			}
		})
	}
	wg.Wait()
	if len(seen) == 0 {
		t.Fatalf("no webhook was claimed")
	}
}
