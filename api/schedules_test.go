package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/schedule"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/postgres"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/store/storetest"
)

// scheduleServer is the API with access control over db, its domain's
// clock ahead of the machine's by a duration the test moves, with a
// token for each role.
type scheduleServer struct {
	url     string
	envs    *rollout.Environments
	db      *store.DB
	ahead   *atomic.Int64
	secrets map[string]string
}

func newScheduleServer(t *testing.T, db *store.DB) *scheduleServer {
	t.Helper()
	ctx := context.Background()
	ahead := new(atomic.Int64)
	clock := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	tokens, err := auth.NewTokens(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &scheduleServer{db: db, ahead: ahead, secrets: map[string]string{}}
	for _, role := range auth.Roles {
		_, secret, err := tokens.Create(ctx, string(role)+"-bot", role, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		s.secrets[string(role)] = secret
	}
	if s.envs, err = rollout.NewEnvironments(ctx, db, func(env string) rollout.Store { return db.In(env) }, clock); err != nil {
		t.Fatal(err)
	}
	svc, _ := s.envs.Service(rollout.Production)
	srv := httptest.NewServer(api.New(svc, api.Options{Auth: api.NewAuth(tokens, nil), Environments: s.envs}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

type answer struct {
	status int
	body   map[string]any
	raw    string
}

func (s *scheduleServer) send(t *testing.T, role, method, path string, body any) answer {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.secrets[role])
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, raw: string(data)}
	_ = json.Unmarshal(data, &a.body)
	return a
}

func (s *scheduleServer) must(t *testing.T, want int, role, method, path string, body any) map[string]any {
	t.Helper()
	a := s.send(t, role, method, path, body)
	if a.status != want {
		t.Fatalf("%s %s as %s = %d %s, want %d", method, path, role, a.status, a.raw, want)
	}
	return a.body
}

// apply moves the clock by d and runs the environment's schedules; it
// returns how many applied.
func (s *scheduleServer) apply(t *testing.T, env string, d time.Duration) int {
	t.Helper()
	s.ahead.Add(int64(d))
	svc, ok := s.envs.Service(env)
	if !ok {
		t.Fatalf("no environment %s", env)
	}
	n, err := svc.ApplyDueSchedules(context.Background(), api.ScheduledChange)
	if err != nil {
		t.Fatalf("ApplyDueSchedules(%s) = %v", env, err)
	}
	return n
}

// schedule returns the schedule id of feature key as listed.
func (s *scheduleServer) schedule(t *testing.T, key, id string) map[string]any {
	t.Helper()
	for _, sc := range s.must(t, 200, "viewer", "GET", "/api/features/"+key+"/schedules", nil)["schedules"].([]any) {
		if sc := sc.(map[string]any); sc["id"] == id {
			return sc
		}
	}
	t.Fatalf("feature %s lists no schedule %s", key, id)
	return nil
}

func at(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }

var banner = map[string]any{"key": "banner", "fallback": "off", "buckets": []any{
	map[string]any{"name": "on", "replicas": 10}, map[string]any{"name": "off", "replicas": 90}}}

func patchOff(when string) map[string]any {
	return map[string]any{"at": when, "change": map[string]any{"kind": "patch", "body": map[string]any{"enabled": false}}, "comment": "banner off Friday 18:00"}
}

// TestSchedules runs the scheduled changes' cases on SQLite and, when
// ROLLOUT_TEST_POSTGRES names a server, on PostgreSQL.
func TestSchedules(t *testing.T) {
	api.SetScheduleRate(t, 1e6, 1e6) // TestScheduleRateLimit tests the limit
	stores := map[string]func(t *testing.T) *store.DB{
		"sqlite": func(t *testing.T) *store.DB {
			db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rollout.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
		"postgres": func(t *testing.T) *store.DB {
			db, err := postgres.Open(context.Background(), storetest.PostgresDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
	}
	cases := []struct {
		name string
		run  func(t *testing.T, s *scheduleServer)
	}{
		{"applied at its time once", testScheduleApplied},
		{"failed with the reason", testScheduleFailed},
		{"editors are bound at apply time", testScheduleEditors},
		{"bad and abusive requests", testScheduleAbuse},
		{"archive cancels, environments are apart", testScheduleArchiveEnvironments},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { c.run(t, newScheduleServer(t, stores[name](t))) })
			}
		})
	}
}

// testScheduleApplied: an editor schedules the banner off; the answer's
// preview is the report of a dry run of that PATCH; viewers and apps may
// not schedule; at its time it applies once, as actor schedule, with one
// audit event naming it, and can no longer be canceled.
func testScheduleApplied(t *testing.T, s *scheduleServer) {
	s.must(t, 201, "admin", "POST", "/api/features", banner)
	dry := s.must(t, 200, "editor", "PATCH", "/api/features/banner?dry_run=true", map[string]any{"enabled": false})["report"].(map[string]any)
	created := s.must(t, 201, "editor", "POST", "/api/features/banner/schedules", patchOff(at(time.Hour)))
	sc := created["schedule"].(map[string]any)
	preview := created["preview"].(map[string]any)
	if preview["churn"] != dry["churn"] || fmt.Sprint(preview["moves"]) != fmt.Sprint(dry["moves"]) || dry["churn"].(float64) < 0.05 {
		t.Errorf("preview %v, want the dry run's report %v", preview, dry)
	}
	if sc["status"] != "pending" || sc["actor"] != "editor-bot" || sc["base_version"] != 1.0 {
		t.Errorf("schedule %v, want pending, by editor-bot, at version 1", sc)
	}
	id := sc["id"].(string)
	for _, role := range []string{"viewer", "sdk", "evaluate", "client"} {
		if a := s.send(t, role, "POST", "/api/features/banner/schedules", patchOff(at(time.Hour))); a.status != 403 {
			t.Errorf("POST schedules as %s = %d %s, want 403", role, a.status, a.raw)
		}
		if a := s.send(t, role, "POST", "/api/features/banner/schedules/"+id+"/cancel", nil); a.status != 403 {
			t.Errorf("cancel as %s = %d %s, want 403", role, a.status, a.raw)
		}
	}
	if got := s.must(t, 200, "viewer", "GET", "/api/schedules?status=pending", nil)["schedules"].([]any); len(got) != 1 {
		t.Errorf("GET /api/schedules?status=pending = %d schedules, want 1", len(got))
	}
	if got := s.must(t, 200, "viewer", "GET", "/api/schedules?status=applied", nil)["schedules"].([]any); len(got) != 0 {
		t.Errorf("GET /api/schedules?status=applied = %d schedules, want none yet", len(got))
	}

	if n := s.apply(t, rollout.Production, 30*time.Minute); n != 0 {
		t.Errorf("before its time, %d schedules applied, want 0", n)
	}
	if n := s.apply(t, rollout.Production, 31*time.Minute); n != 1 {
		t.Errorf("at its time, %d schedules applied, want 1", n)
	}
	if n := s.apply(t, rollout.Production, time.Minute); n != 0 {
		t.Errorf("after, %d schedules applied again, want 0", n)
	}
	if f := s.must(t, 200, "viewer", "GET", "/api/features/banner", nil); f["enabled"] != false || f["version"] != 2.0 {
		t.Errorf("feature after the schedule: enabled %v, version %v; want disabled at version 2", f["enabled"], f["version"])
	}
	vs := s.must(t, 200, "viewer", "GET", "/api/features/banner/versions", nil)["versions"].([]any)
	if v := vs[0].(map[string]any); len(vs) != 2 || v["actor"] != schedule.Actor || v["comment"] != "banner off Friday 18:00" ||
		!strings.HasPrefix(v["summary"].(string), "scheduled by editor-bot; disabled") {
		t.Errorf("newest version %v of %d, want the schedule's", vs[0], len(vs))
	}
	got := s.schedule(t, "banner", id)
	if got["status"] != "applied" || got["version"] != 2.0 || got["delay"] == "" || got["report"] == nil {
		t.Errorf("schedule after its time: %v, want applied as version 2 with its delay and report", got)
	}
	events := s.must(t, 200, "viewer", "GET", "/api/audit?kind=schedule_apply", nil)["events"].([]any)
	if len(events) != 1 || events[0].(map[string]any)["subject"] != id || events[0].(map[string]any)["version"] != 2.0 {
		t.Errorf("schedule_apply events %v, want one of version 2 naming the schedule", events)
	}
	if a := s.send(t, "editor", "POST", "/api/features/banner/schedules/"+id+"/cancel", nil); a.status != 409 {
		t.Errorf("cancel of an applied schedule = %d %s, want 409", a.status, a.raw)
	}
}

// testScheduleFailed: a change the feature no longer takes, and one that
// would move more than its max_churn, fail with the reason and an audit
// event each, and change nothing; the failed one cannot be canceled.
func testScheduleFailed(t *testing.T, s *scheduleServer) {
	s.must(t, 201, "admin", "POST", "/api/features", map[string]any{"key": "promo", "buckets": []any{
		map[string]any{"name": "A", "replicas": 50}, map[string]any{"name": "B", "replicas": 50}, map[string]any{"name": "old", "replicas": 0}}})
	fallback := s.must(t, 201, "admin", "POST", "/api/features/promo/schedules", map[string]any{"at": at(time.Hour),
		"change": map[string]any{"kind": "patch", "body": map[string]any{"fallback": "old"}}})["schedule"].(map[string]any)["id"].(string)
	buckets := s.must(t, 201, "admin", "POST", "/api/features/promo/schedules", map[string]any{"at": at(time.Hour), "max_churn": 0.2,
		"change": map[string]any{"kind": "buckets", "body": map[string]any{"buckets": []any{
			map[string]any{"name": "A", "replicas": 60}, map[string]any{"name": "B", "replicas": 50}}}}})["schedule"].(map[string]any)["id"].(string)
	// Meanwhile the feature moves on: old is removed, and A shrinks, so
	// that growing it back moves more users.
	s.must(t, 200, "admin", "DELETE", "/api/features/promo/buckets/old", nil)
	s.must(t, 200, "admin", "PUT", "/api/features/promo/buckets", map[string]any{"buckets": []any{
		map[string]any{"name": "A", "replicas": 5}, map[string]any{"name": "B", "replicas": 50}}})
	if n := s.apply(t, rollout.Production, time.Hour+time.Second); n != 0 {
		t.Errorf("%d schedules applied, want none", n)
	}
	if f := s.must(t, 200, "viewer", "GET", "/api/features/promo", nil); f["version"] != 3.0 {
		t.Errorf("feature at version %v, want 3: the failed schedules change nothing", f["version"])
	}
	for id, want := range map[string]string{fallback: `"old"`, buckets: "max_churn of 20 %"} {
		sc := s.schedule(t, "promo", id)
		if sc["status"] != "failed" || !strings.Contains(sc["reason"].(string), want) {
			t.Errorf("schedule %v, want failed with a reason saying %s", sc, want)
		}
		if a := s.send(t, "admin", "POST", "/api/features/promo/schedules/"+id+"/cancel", nil); a.status != 409 {
			t.Errorf("cancel of a failed schedule = %d %s, want 409", a.status, a.raw)
		}
	}
	if events := s.must(t, 200, "viewer", "GET", "/api/audit?kind=schedule_fail", nil)["events"].([]any); len(events) != 2 {
		t.Errorf("%d schedule_fail events, want 2", len(events))
	}
}

// testScheduleEditors: an editor may not schedule what the settings would
// not let them do now; at its time an editor's schedule is held to the
// settings as they are then: over the editors' churn limit, or under
// approvals, it fails (it opens no change request). An admin's is not
// held.
func testScheduleEditors(t *testing.T, s *scheduleServer) {
	s.must(t, 201, "admin", "POST", "/api/features", banner)
	wide := map[string]any{"at": at(time.Hour), "change": map[string]any{"kind": "buckets", "body": map[string]any{"buckets": []any{
		map[string]any{"name": "on", "replicas": 90}, map[string]any{"name": "off", "replicas": 10}}}}}
	if a := s.send(t, "editor", "POST", "/api/features/banner/schedules", wide); a.status != 403 {
		t.Errorf("editor's schedule above the churn limit = %d %s, want 403", a.status, a.raw)
	}
	churn := s.must(t, 201, "editor", "POST", "/api/features/banner/schedules", patchOff(at(time.Hour)))["schedule"].(map[string]any)["id"].(string)
	admins := s.must(t, 201, "admin", "POST", "/api/features/banner/schedules", map[string]any{"at": at(2 * time.Hour),
		"change": map[string]any{"kind": "patch", "body": map[string]any{"description": "by an admin"}}})["schedule"].(map[string]any)["id"].(string)
	s.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"max_churn": 0.01})
	if n := s.apply(t, rollout.Production, time.Hour+time.Second); n != 0 {
		t.Errorf("%d applied, want 0", n)
	}
	if sc := s.schedule(t, "banner", churn); sc["status"] != "failed" || !strings.Contains(sc["reason"].(string), "editors' limit") {
		t.Errorf("editor's schedule over the new limit: %v, want failed naming the editors' limit", sc)
	}
	approval := s.must(t, 201, "editor", "POST", "/api/features/banner/schedules", map[string]any{"at": at(3 * time.Hour),
		"change": map[string]any{"kind": "patch", "body": map[string]any{"description": "by an editor"}}})["schedule"].(map[string]any)["id"].(string)
	s.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"max_churn": 0.25, "require_approval": map[string]any{"features": []string{"banner"}}})
	if a := s.send(t, "editor", "POST", "/api/features/banner/schedules", patchOff(at(5*time.Hour))); a.status != 403 || !strings.Contains(a.raw, "approval") {
		t.Errorf("editor's schedule under approvals = %d %s, want 403 naming approvals", a.status, a.raw)
	}
	if n := s.apply(t, rollout.Production, 2*time.Hour); n != 1 {
		t.Errorf("%d applied, want 1: the admin's", n)
	}
	if sc := s.schedule(t, "banner", admins); sc["status"] != "applied" {
		t.Errorf("admin's schedule %v, want applied", sc)
	}
	if sc := s.schedule(t, "banner", approval); sc["status"] != "failed" || !strings.Contains(sc["reason"].(string), "needs approval") {
		t.Errorf("editor's schedule under approvals: %v, want failed, needing approval", sc)
	}
	if rs := s.must(t, 200, "viewer", "GET", "/api/requests", nil)["requests"].([]any); len(rs) != 0 {
		t.Errorf("%d change requests, want none: a schedule opens none", len(rs))
	}
}

// testScheduleAbuse: times in the past or too far ahead, bodies the route
// refuses, guards inside the body, bodies too large, too many pending
// schedules and too many requests are refused with 4xx and store nothing;
// another feature's schedule is not found.
func testScheduleAbuse(t *testing.T, s *scheduleServer) {
	s.must(t, 201, "admin", "POST", "/api/features", banner)
	s.must(t, 201, "admin", "POST", "/api/features", map[string]any{"key": "other", "buckets": []any{map[string]any{"name": "A"}}})
	rules := func(body any) map[string]any {
		return map[string]any{"at": at(time.Hour), "change": map[string]any{"kind": "rules", "body": body}}
	}
	for name, c := range map[string]struct {
		body any
		want int
	}{
		"at in the past":        {patchOff(at(-time.Minute)), 422},
		"at in 100 years":       {patchOff(at(100 * 365 * 24 * time.Hour)), 422},
		"at in 13 months":       {patchOff(at(396 * 24 * time.Hour)), 422},
		"at not a time":         {patchOff("Friday 18:00"), 400},
		"no at":                 {map[string]any{"change": map[string]any{"kind": "patch", "body": map[string]any{"enabled": false}}}, 400},
		"no change":             {map[string]any{"at": at(time.Hour)}, 400},
		"unknown kind":          {map[string]any{"at": at(time.Hour), "change": map[string]any{"kind": "archive", "body": map[string]any{}}}, 422},
		"body not an object":    {map[string]any{"at": at(time.Hour), "change": map[string]any{"kind": "patch", "body": []int{1}}}, 400},
		"no body":               {map[string]any{"at": at(time.Hour), "change": map[string]any{"kind": "patch"}}, 400},
		"unknown field in body": {map[string]any{"at": at(time.Hour), "change": map[string]any{"kind": "patch", "body": map[string]any{"enable": false}}}, 400},
		"guard in body":         {map[string]any{"at": at(time.Hour), "change": map[string]any{"kind": "patch", "body": map[string]any{"enabled": false, "dry_run": true}}}, 400},
		"nothing to patch":      {map[string]any{"at": at(time.Hour), "change": map[string]any{"kind": "patch", "body": map[string]any{}}}, 422},
		"rules missing":         {rules(map[string]any{}), 400},
		"rule with a bad op": {rules(map[string]any{"rules": []any{map[string]any{"name": "x",
			"conditions": []any{map[string]any{"attribute": "a", "op": "near", "value": "b"}}, "serve": map[string]any{"bucket": "on"}}}}), 422},
		"rule serving no bucket": {rules(map[string]any{"rules": []any{map[string]any{"name": "x",
			"conditions": []any{map[string]any{"attribute": "a", "op": "eq", "value": "b"}}, "serve": map[string]any{"bucket": "nope"}}}}), 422},
		"buckets without replicas": {map[string]any{"at": at(time.Hour), "change": map[string]any{"kind": "buckets", "body": map[string]any{"buckets": []any{map[string]any{"name": "on"}}}}}, 400},
		"over max_churn now":       {map[string]any{"at": at(time.Hour), "max_churn": 0.01, "change": map[string]any{"kind": "patch", "body": map[string]any{"enabled": false}}}, 409},
		"bad max_churn":            {map[string]any{"at": at(time.Hour), "max_churn": 2, "change": map[string]any{"kind": "patch", "body": map[string]any{"enabled": false}}}, 422},
		"too large":                {map[string]any{"at": at(time.Hour), "change": map[string]any{"kind": "patch", "body": map[string]any{"description": strings.Repeat("x", 200<<10)}}}, 413},
		"not JSON":                 {`{"at":`, 400},
	} {
		if a := s.send(t, "admin", "POST", "/api/features/banner/schedules", c.body); a.status != c.want || a.body["error"] == nil {
			t.Errorf("%s: %d %s, want %d with a JSON error", name, a.status, a.raw, c.want)
		}
	}
	if a := s.send(t, "admin", "POST", "/api/features/nope/schedules", patchOff(at(time.Hour))); a.status != 404 {
		t.Errorf("schedule of a missing feature = %d %s, want 404", a.status, a.raw)
	}
	if got := s.must(t, 200, "viewer", "GET", "/api/schedules", nil)["schedules"].([]any); len(got) != 0 {
		t.Fatalf("refused schedules were stored: %v", got)
	}
	for _, q := range []string{"status=done", "limit=0", "limit=100000", "limit=x"} {
		if a := s.send(t, "viewer", "GET", "/api/schedules?"+q, nil); a.status/100 != 4 {
			t.Errorf("GET /api/schedules?%s = %d, want 4xx", q, a.status)
		}
	}

	// Another feature's schedule is not found through this one.
	id := s.must(t, 201, "admin", "POST", "/api/features/other/schedules", map[string]any{"at": at(time.Hour),
		"change": map[string]any{"kind": "patch", "body": map[string]any{"description": "x"}}})["schedule"].(map[string]any)["id"].(string)
	if a := s.send(t, "admin", "POST", "/api/features/banner/schedules/"+id+"/cancel", nil); a.status != 404 {
		t.Errorf("cancel of another feature's schedule = %d %s, want 404", a.status, a.raw)
	}
	if a := s.send(t, "admin", "POST", "/api/features/banner/schedules/nope/cancel", nil); a.status != 404 {
		t.Errorf("cancel of no schedule = %d %s, want 404", a.status, a.raw)
	}
	s.must(t, 200, "admin", "POST", "/api/features/other/schedules/"+id+"/cancel", nil)
	if a := s.send(t, "admin", "POST", "/api/features/other/schedules/"+id+"/cancel", nil); a.status != 409 {
		t.Errorf("cancel twice = %d %s, want 409", a.status, a.raw)
	}

	// At most MaxPendingPerFeature pending schedules of one feature.
	body := map[string]any{"at": at(time.Hour), "change": map[string]any{"kind": "patch", "body": map[string]any{"description": "many"}}}
	created := 0
	for range schedule.MaxPendingPerFeature + 5 {
		a := s.send(t, "admin", "POST", "/api/features/banner/schedules", body)
		switch a.status {
		case 201:
			created++
		case 409:
		default:
			t.Fatalf("schedule %d = %d %s", created, a.status, a.raw)
		}
		if a.status == 409 {
			break
		}
	}
	if created != schedule.MaxPendingPerFeature {
		t.Errorf("%d schedules made before a 409, want %d", created, schedule.MaxPendingPerFeature)
	}
}

// testScheduleArchiveEnvironments: a schedule is its environment's; the
// feature's archive cancels the pending ones everywhere.
func testScheduleArchiveEnvironments(t *testing.T, s *scheduleServer) {
	s.must(t, 201, "admin", "POST", "/api/features", banner)
	s.must(t, 201, "admin", "POST", "/api/environments", map[string]any{"key": "staging", "name": "Staging", "copy_from": "production"})
	staged := s.must(t, 201, "editor", "POST", "/api/features/banner/schedules?env=staging", patchOff(at(time.Hour)))["schedule"].(map[string]any)
	if staged["environment"] != "staging" {
		t.Errorf("schedule made with ?env=staging: %v, want staging's", staged)
	}
	if got := s.must(t, 200, "viewer", "GET", "/api/schedules", nil)["schedules"].([]any); len(got) != 0 {
		t.Errorf("production lists %v, want none: the schedule is staging's", got)
	}
	if n := s.apply(t, rollout.Production, time.Hour+time.Second); n != 0 {
		t.Errorf("production applied %d, want 0", n)
	}
	if n := s.apply(t, "staging", 0); n != 1 {
		t.Errorf("staging applied %d, want 1", n)
	}
	if f := s.must(t, 200, "viewer", "GET", "/api/features/banner?env=staging", nil); f["enabled"] != false {
		t.Errorf("staging's banner enabled = %v, want false", f["enabled"])
	}
	if f := s.must(t, 200, "viewer", "GET", "/api/features/banner", nil); f["enabled"] != true {
		t.Errorf("production's banner enabled = %v, want true", f["enabled"])
	}

	prod := s.must(t, 201, "editor", "POST", "/api/features/banner/schedules", patchOff(at(3*time.Hour)))["schedule"].(map[string]any)["id"].(string)
	stag := s.must(t, 201, "editor", "POST", "/api/features/banner/schedules?env=staging", map[string]any{"at": at(3 * time.Hour),
		"change": map[string]any{"kind": "patch", "body": map[string]any{"enabled": true}}})["schedule"].(map[string]any)["id"].(string)
	s.must(t, 200, "admin", "POST", "/api/features/banner/archive", map[string]any{"comment": "campaign over"})
	for env, id := range map[string]string{"production": prod, "staging": stag} {
		scs := s.must(t, 200, "viewer", "GET", "/api/schedules?status=canceled&env="+env, nil)["schedules"].([]any)
		if len(scs) != 1 || scs[0].(map[string]any)["id"] != id || !strings.Contains(scs[0].(map[string]any)["reason"].(string), "archived") {
			t.Errorf("%s's canceled schedules after the archive: %v, want %s, canceled by the archive", env, scs, id)
		}
	}
	if n := s.apply(t, rollout.Production, 2*time.Hour); n != 0 {
		t.Errorf("after the archive, %d applied, want 0", n)
	}
	events := s.must(t, 200, "viewer", "GET", "/api/audit?kind=schedule_cancel", nil)["events"].([]any)
	if len(events) != 1 || events[0].(map[string]any)["subject"] != prod {
		t.Errorf("production's schedule_cancel events %v, want one naming %s", events, prod)
	}
}

// TestScheduleRateLimit: a token that makes schedules faster than the
// limit is answered 429, with Retry-After, and nothing is stored.
func TestScheduleRateLimit(t *testing.T) {
	api.SetScheduleRate(t, 0.001, 3)
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := newScheduleServer(t, db)
	s.must(t, 201, "admin", "POST", "/api/features", banner)
	for range 3 {
		s.must(t, 201, "editor", "POST", "/api/features/banner/schedules", patchOff(at(time.Hour)))
	}
	if a := s.send(t, "editor", "POST", "/api/features/banner/schedules", patchOff(at(time.Hour))); a.status != 429 {
		t.Errorf("the 4th schedule at once = %d %s, want 429", a.status, a.raw)
	}
	if got := s.must(t, 200, "viewer", "GET", "/api/schedules", nil)["schedules"].([]any); len(got) != 3 {
		t.Errorf("%d schedules stored, want 3", len(got))
	}
	// Another token has its own allowance.
	s.must(t, 201, "admin", "POST", "/api/features/banner/schedules", patchOff(at(time.Hour)))
}
