package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/cmd/internal/serve"
	"github.com/rollout/rollout/store/storetest"
)

// TestSchedulesOnceAcrossInstances: two rollout binaries serve one
// PostgreSQL database, each running its schedule runner every 20ms; ten
// changes scheduled through either for one moment, two of each of five
// features, each apply exactly once: one version each, by schedule, and
// one schedule_apply event each.
func TestSchedulesOnceAcrossInstances(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	ps := startInstances(t, 2, dsn, "--schedule-interval", "20ms")
	for i := range 5 {
		mustCall(t, 201, "POST", ps[0].url+"/api/features", fmt.Sprintf(`{"key":"f%d","buckets":[{"name":"A","replicas":10},{"name":"B","replicas":10}]}`, i))
	}
	// One moment for all, far enough ahead that every schedule is made
	// before it.
	due := time.Now().Add(6 * time.Second).UTC().Format(time.RFC3339Nano)
	var ids []string
	for i := range 10 {
		body := fmt.Sprintf(`{"at":%q,"change":{"kind":"patch","body":{"description":"d%d"}},"comment":"at once"}`, due, i)
		_, data := mustCall(t, 201, "POST", fmt.Sprintf("%s/api/features/f%d/schedules", ps[i%2].url, i%5), body)
		var created struct{ Schedule struct{ ID string } }
		json.Unmarshal(data, &created)
		ids = append(ids, created.Schedule.ID)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, data := mustCall(t, 200, "GET", ps[1].url+"/api/schedules?status=applied", "")
		var got struct{ Schedules []any }
		json.Unmarshal(data, &got)
		if len(got.Schedules) == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			_, all := mustCall(t, 200, "GET", ps[1].url+"/api/schedules", "")
			t.Fatalf("%d of %d schedules applied after 90s: %s\n%s\n%s", len(got.Schedules), len(ids), all, ps[0].stderr, ps[1].stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, data := mustCall(t, 200, "GET", ps[0].url+"/api/audit?kind=schedule_apply&limit=100", "")
	var events struct {
		Events []struct {
			Subject, Actor, Feature string
			Version                 int
		}
	}
	json.Unmarshal(data, &events)
	subjects := map[string]int{}
	for _, e := range events.Events {
		subjects[e.Subject]++
		if e.Actor != "schedule" {
			t.Errorf("event %+v, want by schedule", e)
		}
	}
	for _, id := range ids {
		if subjects[id] != 1 {
			t.Errorf("schedule %s has %d schedule_apply events, want exactly 1 (all: %+v)", id, subjects[id], events.Events)
		}
	}
	if len(events.Events) != len(ids) {
		t.Errorf("%d schedule_apply events, want %d", len(events.Events), len(ids))
	}
	for i := range 5 {
		_, data := mustCall(t, 200, "GET", fmt.Sprintf("%s/api/features/f%d/versions", ps[i%2].url, i), "")
		var history struct{ Versions []struct{ Version int } }
		json.Unmarshal(data, &history)
		if len(history.Versions) != 3 {
			t.Errorf("feature f%d has %d versions, want 3: its creation and its two schedules once each", i, len(history.Versions))
		}
	}
}

// TestScheduleDueWhileStopped: a schedule that came due while no server
// ran applies when one starts again, with its delay recorded, on SQLite
// and on PostgreSQL. The servers' clock is moved, not waited for.
func TestScheduleDueWhileStopped(t *testing.T) {
	dbs := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return filepath.Join(t.TempDir(), "rollout.db") },
		"postgres": func(t *testing.T) string { return storetest.PostgresDSN(t) },
	}
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			dbPath := dbs[name](t)
			var ahead atomic.Int64
			clock := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
			start := func() *server {
				t.Helper()
				m := &serve.Server{Addr: "127.0.0.1:0", DBPath: dbPath, ScheduleInterval: 20 * time.Millisecond, Clock: clock}
				if err := m.Open(context.Background()); err != nil {
					t.Fatalf("open server: %v", err)
				}
				s := &server{t: t, m: m, dbPath: dbPath}
				t.Cleanup(s.stop)
				return s
			}
			s := start()
			s.must(201, "POST", "/api/features", abcFeature("banner"))
			sc := s.must(201, "POST", "/api/features/banner/schedules", map[string]any{
				"at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "change": map[string]any{"kind": "patch", "body": map[string]any{"enabled": false}},
			})["schedule"].(map[string]any)
			s.stop()
			ahead.Store(int64(3 * time.Hour)) // two hours past its time while stopped
			s = start()
			deadline := time.Now().Add(30 * time.Second)
			var got map[string]any
			for {
				got = s.must(200, "GET", "/api/features/banner/schedules", nil)["schedules"].([]any)[0].(map[string]any)
				if got["status"] != "pending" && got["status"] != "running" || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if got["id"] != sc["id"] || got["status"] != "applied" || !strings.HasPrefix(got["delay"].(string), "2h0m") {
				t.Fatalf("after the restart: schedule %v, want applied about 2h late", got)
			}
			vs := s.must(200, "GET", "/api/features/banner/versions", nil)["versions"].([]any)
			if len(vs) != 2 || vs[0].(map[string]any)["actor"] != "schedule" {
				t.Errorf("versions %v, want the creation and the schedule's", vs)
			}
			if f := s.must(200, "GET", "/api/features/banner", nil); f["enabled"] != false {
				t.Errorf("banner enabled = %v, want false", f["enabled"])
			}
		})
	}
}

// TestServeScheduleInterval: --schedule-interval and
// ROLLOUT_SCHEDULE_INTERVAL reach the server (the flag over the
// environment); an interval below 10ms, or not a duration, is refused.
func TestServeScheduleInterval(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    time.Duration
		wantErr string
	}{
		{name: "default", want: 10 * time.Second},
		{name: "flag", args: []string{"--schedule-interval", "1s"}, want: time.Second},
		{name: "environment", env: map[string]string{"ROLLOUT_SCHEDULE_INTERVAL": "30s"}, want: 30 * time.Second},
		{name: "flag over environment", args: []string{"--schedule-interval", "2s"}, env: map[string]string{"ROLLOUT_SCHEDULE_INTERVAL": "30s"}, want: 2 * time.Second},
		{name: "too short", args: []string{"--schedule-interval", "1ms"}, wantErr: "--schedule-interval"},
		{name: "bad environment", env: map[string]string{"ROLLOUT_SCHEDULE_INTERVAL": "often"}, wantErr: "ROLLOUT_SCHEDULE_INTERVAL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			s, err := parseServe(tt.args, &stdout, &stderr, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseServe(%q) error = %v, want one naming %s", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.LogWriter.Close(context.Background())
			if s.ScheduleInterval != tt.want {
				t.Errorf("parseServe(%q) schedule interval = %v, want %v", tt.args, s.ScheduleInterval, tt.want)
			}
		})
	}
}
