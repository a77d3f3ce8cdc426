package web_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/schedule"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

// TestBrowserSchedules: on dark-mode a product manager is told a time in
// the past will not do, schedules switching the feature off tomorrow at
// 18:00 with a reason and sees it listed, schedules it on again the day
// after and cancels that one; when the runner reaches the first one's
// time the feature is off, by schedule, and the section lists nothing
// pending.
func TestBrowserSchedules(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var ahead atomic.Int64
	svc, err := rollout.NewService(ctx, db, func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
	if err != nil {
		t.Fatal(err)
	}
	a := &app{e: api.New(svc, api.Options{Plans: testPlanLimits, Routes: web.Routes(svc, web.Options{})}), svc: svc, db: db}
	a.seed(t)
	b := startBrowserOn(t, a)
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode"), waitFor("#schedules"), openAt("#schedules"))
	if got := b.text("#no-schedules"); got != "No changes scheduled." {
		t.Errorf("no schedules = %q", got)
	}

	// datetime-local takes local time, as the browser's clock reads it.
	local := func(d time.Time) string { return d.Format("2006-01-02T15:04") }
	form := `form[data-schedule=create] `
	b.do(chromedp.SetValue(chromedp.CSS("#schedule-at"), local(time.Now().Add(-time.Hour))), chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(form+".error:not([hidden])"))
	if got := b.text(form + ".error"); !strings.HasPrefix(got, "Give a time in the future") {
		t.Errorf("a time in the past = %q", got)
	}
	tomorrow := time.Now().Add(24 * time.Hour)
	friday := time.Date(tomorrow.Year(), tomorrow.Month(), tomorrow.Day(), 18, 0, 0, 0, time.Local)
	b.do(chromedp.SetValue(chromedp.CSS("#schedule-enabled"), "false"), chromedp.SetValue(chromedp.CSS("#schedule-at"), local(friday)), fill("#schedule-comment", "the sale ends"),
		chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(`li.schedule`))
	b.do(chromedp.SetValue(chromedp.CSS("#schedule-enabled"), "true"), chromedp.SetValue(chromedp.CSS("#schedule-at"), local(friday.Add(24*time.Hour))),
		chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(`li.schedule:nth-child(2)`))
	items := evaluate[[]string](b, `[...document.querySelectorAll('li.schedule .schedule-summary')].map(n => n.textContent)`)
	if strings.Join(items, "|") != "disabled|enabled" {
		t.Errorf("listed %q, want the switch off, then on", items)
	}
	if got := b.text(`li.schedule:nth-child(1)`); !strings.Contains(got, "the sale ends") {
		t.Errorf("first schedule reads %q, want its reason", got)
	}
	b.screenshot("schedules", 1280)

	// Cancel the second.
	b.do(chromedp.Click(chromedp.CSS(`li.schedule:nth-child(2) button[data-schedule-cancel]`)))
	b.do(chromedp.WaitNotPresent(chromedp.CSS(`li.schedule:nth-child(2)`)))
	if n := evaluate[int](b, `document.querySelectorAll('li.schedule').length`); n != 1 {
		t.Errorf("%d schedules listed after the cancel, want 1", n)
	}
	scs, err := svc.Schedules(ctx, schedule.Query{Feature: "dark-mode"})
	if err != nil || len(scs) != 2 || scs[0].Status != schedule.Pending || scs[1].Status != schedule.Canceled {
		t.Fatalf("schedules %+v, %v; want one pending, one canceled", scs, err)
	}
	if !scs[0].At.Equal(friday) {
		t.Errorf("scheduled at %v, want %v", scs[0].At, friday)
	}

	// Its time comes.
	ahead.Store(int64(time.Until(friday) + time.Minute))
	if n, err := svc.ApplyDueSchedules(ctx, api.ScheduledChange); n != 1 || err != nil {
		t.Fatalf("ApplyDueSchedules = %d, %v; want 1", n, err)
	}
	b.do(chromedp.Reload(), waitFor("#no-schedules"))
	vs, err := svc.Versions(ctx, "dark-mode", 0, 1)
	if err != nil || len(vs) != 1 || vs[0].Actor != schedule.Actor || vs[0].Config.Enabled {
		t.Errorf("newest version %+v, %v; want dark-mode off, by schedule", vs, err)
	}
}
