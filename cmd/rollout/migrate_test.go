package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rollout/rollout/cmd/internal/serve"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/history"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/rollout/ramp"
	"github.com/rollout/rollout/rollout/request"
	"github.com/rollout/rollout/rollout/settings"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/postgres"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/store/storetest"
	"github.com/rollout/rollout/webhook"
)

// serviceDatabase makes a SQLite database the way users do: features
// created and changed through the running service's API (several versions
// each, an override, a rollback, a disabled feature, a deleted one),
// evaluations counted and flushed at shutdown, then API tokens made and
// revoked with the rollout token command, one name taken again after its
// revocation. It returns the file and, for each token secret, whether it
// must authenticate.
func serviceDatabase(t *testing.T) (path string, secrets map[string]bool) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "rollout.db")
	s := startServer(t, path)
	for _, key := range []string{"checkout", "search", "banner", "gone"} {
		s.must(201, "POST", "/api/features", abcFeature(key))
	}
	evaluate := func(key string) {
		for i := range 50 {
			s.evaluate(key, fmt.Sprint("user:", i))
		}
	}
	evaluate("checkout")
	s.must(200, "POST", "/api/features/checkout/buckets", map[string]any{"name": "D", "replicas": 3, "value": map[string]any{"color": "<red>", "n": 2.5}})
	evaluate("checkout")
	s.must(200, "PUT", "/api/features/checkout/overrides/user1", map[string]any{"bucket": "A"})
	s.must(200, "PATCH", "/api/features/checkout", map[string]any{"description": "checkout & more"})
	s.must(200, "POST", "/api/features/checkout/rollback", map[string]any{"version": 2})
	evaluate("checkout")
	s.must(200, "PUT", "/api/features/search/buckets/B", map[string]any{"replicas": 5})
	evaluate("search")
	s.must(200, "PATCH", "/api/features/banner", map[string]any{"enabled": false})
	evaluate("banner")
	evaluate("gone")
	s.must(204, "DELETE", "/api/features/gone", nil)
	// Ramps: one canceled, one active whose steps are years away.
	ramp := s.must(201, "POST", "/api/features/search/ramps", map[string]any{"bucket": "A", "steps": []float64{0.5, 1}, "every": "24h", "start": "2099-01-01T00:00:00Z"})
	s.must(200, "POST", "/api/features/search/ramps/"+ramp["ramp"].(map[string]any)["id"].(string)+"/cancel", nil)
	s.must(201, "POST", "/api/features/search/ramps", map[string]any{"bucket": "B", "steps": []float64{0.9}, "at": []string{"2099-01-01T00:00:00Z"}, "max_churn": 0.4})
	// Scheduled changes: one canceled, one pending months away.
	later := time.Now().Add(300 * 24 * time.Hour).UTC().Format(time.RFC3339)
	sc := s.must(201, "POST", "/api/features/banner/schedules", map[string]any{"at": later, "change": map[string]any{"kind": "patch", "body": map[string]any{"enabled": true}}})
	s.must(200, "POST", "/api/features/banner/schedules/"+sc["schedule"].(map[string]any)["id"].(string)+"/cancel", nil)
	s.must(201, "POST", "/api/features/search/schedules", map[string]any{"at": later, "max_churn": 0.5, "comment": "later",
		"change": map[string]any{"kind": "buckets", "body": map[string]any{"buckets": []any{map[string]any{"name": "A", "replicas": 3}, map[string]any{"name": "B", "replicas": 4}, map[string]any{"name": "C", "replicas": 3}}}}})
	s.stop() // flushes the evaluation counts

	// Settings, and change requests: one open, one rejected.
	{
		ctx := context.Background()
		db, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := rollout.NewService(ctx, db, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.UpdateSettings(ctx, settings.Settings{MaxChurn: 0.1, RequireApproval: settings.ApprovalPolicy{Features: []string{"checkout"}}}, 0, "ada", ""); err != nil {
			t.Fatal(err)
		}
		for _, desc := range []string{"open", "rejected"} {
			res, err := svc.Change(ctx, "checkout", change.Patch(&desc, nil, nil), rollout.ChangeOptions{Actor: "ed", Role: auth.RoleEditor})
			if err != nil || res.Request == nil {
				t.Fatalf("editor's change = %+v, %v; want a request", res, err)
			}
			if desc == "rejected" {
				if _, err := svc.RejectRequest(ctx, res.Request.ID, "ada", "no"); err != nil {
					t.Fatal(err)
				}
			}
		}
		fillTargeting(t, svc, db)
		// An environment, staging, copied from production, with a change
		// of its own.
		envs, err := rollout.NewEnvironments(ctx, db, func(env string) rollout.Store { return db.In(env) }, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := envs.Create(ctx, rollout.Environment{Key: "staging", Name: "Staging", Protected: true}, rollout.EnvironmentOptions{CopyFrom: rollout.Production}); err != nil {
			t.Fatal(err)
		}
		staging, _ := envs.Service("staging")
		on := true
		if _, err := staging.Change(ctx, "banner", change.Patch(nil, &on, nil), rollout.ChangeOptions{Actor: "ada"}); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}

	secrets = map[string]bool{}
	secrets[createToken(t, path, "admin", "admin")] = true
	secrets[createToken(t, path, "ci", "editor")] = false
	if _, stderr, err := runCLI(t, "token", "revoke", "--name", "ci", "--db", path); err != nil {
		t.Fatalf("token revoke ci: %v\n%s", err, stderr)
	}
	secrets[createToken(t, path, "ci", "viewer")] = true
	secrets[createToken(t, path, "old", "evaluate")] = false
	if _, stderr, err := runCLI(t, "token", "revoke", "--name", "old", "--db", path); err != nil {
		t.Fatalf("token revoke old: %v\n%s", err, stderr)
	}
	return path, secrets
}

func openSQLite(t *testing.T, path string) *store.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("sqlite.Open(%q) = %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openPostgres(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("postgres.Open = %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// fillTargeting adds to the database of svc what serviceDatabase's
// service calls leave empty: segments (one changed once), a feature with
// rules using them, overrides and bucket_by, evaluations counted per rule,
// a webhook with a secret and a delivery, a session signed out, a batch of
// exposures and an idempotency key.
func fillTargeting(t *testing.T, svc *rollout.Service, db *store.DB) {
	t.Helper()
	ctx := context.Background()
	cond := func(attr, op string, v any) feature.Condition {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return feature.Condition{Attribute: attr, Op: op, Value: b}
	}
	if _, err := svc.CreateSegment(ctx, feature.Segment{Key: "staff", Conditions: []feature.Condition{cond("email", feature.OpEndsWith, "@example.com")}}, rollout.ChangeOptions{Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateSegment(ctx, feature.Segment{Key: "pro", Conditions: []feature.Condition{cond("plan", feature.OpIn, []string{"pro"})}}, rollout.ChangeOptions{Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, targetedFeature("gated"), rollout.ChangeOptions{Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	// A change of a segment is a new version of the feature using it.
	if _, err := svc.UpdateSegment(ctx, "pro", "paying", []feature.Condition{cond("plan", feature.OpIn, []string{"pro", "enterprise"})}, rollout.ChangeOptions{Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	// A user list (segment_users), edited once.
	if _, err := svc.CreateUserList(ctx, "testers", "beta testers", []string{"user:1", "user:2", "Üser 3", "user:4"}, rollout.ChangeOptions{Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.EditUserList(ctx, "testers", []string{"user:5"}, []string{"user:4"}, rollout.ChangeOptions{Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	snap := svc.Snapshot()
	for i := range 40 {
		c := feature.Context{"email": fmt.Sprintf("u%d@example.com", i), "account": fmt.Sprint("acct", i%7)}
		if i%2 == 1 {
			c = feature.Context{"email": fmt.Sprintf("u%d@else.org", i), "plan": "pro", "account": fmt.Sprint("acct", i%5)}
		}
		if _, err := snap.EvaluateContext("gated", fmt.Sprint("user:", i), c); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.FlushExposures(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	h, err := webhook.NewHook("https://hooks.example.com/services/T1/B1/SECRETPATH", "whsec-0123456789-sekrit", []string{"*"}, "ada", now)
	if err != nil {
		t.Fatal(err)
	}
	if h, err = db.CreateWebhook(ctx, h); err != nil {
		t.Fatal(err)
	}
	// The webhook's cursor is at the last event: one more to deliver.
	if _, err := svc.Change(ctx, "gated", change.Patch(ptr("after the webhook"), nil, nil), rollout.ChangeOptions{Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	claims, err := db.ClaimWebhooks(ctx, "worker", now.Add(time.Second), time.Minute, 10)
	if err != nil || len(claims) != 1 {
		t.Fatalf("ClaimWebhooks = %+v, %v; want the webhook with an event", claims, err)
	}
	e := claims[0].Event
	if ok, err := db.FinishWebhook(ctx, "worker", h.ID, webhook.Outcome{
		Delivery: webhook.Delivery{Webhook: h.ID, EventID: e.ID, EventKind: e.Kind, Attempt: 1, Time: now, Status: 500, Error: "the endpoint answered 500"},
		Cursor:   claims[0].Hook.Cursor, Failures: 1, FirstFailure: &now, NextAttempt: now.Add(time.Minute),
	}); err != nil || !ok {
		t.Fatalf("FinishWebhook = %v, %v", ok, err)
	}
	if err := db.EndSession(ctx, "session-signed-out", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateSession(ctx, auth.Session{ID: "person-1", Person: "ann@example.com", Subject: "u-ann", Role: auth.RoleAdmin,
		CreatedAt: now, ExpiresAt: now.Add(12 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateSession(ctx, auth.Session{ID: "person-2", Person: "pat@example.com", Subject: "u-pat", Role: auth.RoleEditor,
		CreatedAt: now, ExpiresAt: now.Add(12 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeSession(ctx, "person-2", now, "ann@example.com via sso"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SessionKey(ctx); err != nil {
		t.Fatal(err)
	}
	f, _ := snap.Feature("gated")
	if _, err := db.AddExposureBatch(ctx, "batch-1", now, []feature.Exposure{{FeatureID: f.ID, Version: f.Version, Bucket: "on", Count: 3}}); err != nil {
		t.Fatal(err)
	}
	// An experiment with its metric, an exposed user (one a multiple
	// exposure) and a batch of events.
	if err := db.CreateMetric(ctx, experiment.Metric{Key: "purchase", Kind: experiment.MetricMean, Description: "sales", HigherIsBetter: true, CreatedAt: now, CreatedBy: "ada"}, audit.Event{}); err != nil {
		t.Fatal(err)
	}
	x := experiment.Experiment{ID: "exp-1", Feature: "gated", FeatureID: f.ID, Name: "green", Control: "on", Metrics: []string{"purchase"},
		Version: f.Version, Shares: map[string]float64{"on": 1}, StartedAt: now, StartedBy: "ada"}
	if err := db.StartExperiment(ctx, x, audit.Event{}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddFirstExposures(ctx, []experiment.FirstExposure{
		{Experiment: "exp-1", UserHash: experiment.UserHash("u1"), Bucket: "on", Version: f.Version, At: now},
		{Experiment: "exp-1", UserHash: experiment.UserHash("u2"), Bucket: "on", Version: f.Version, At: now},
		{Experiment: "exp-1", UserHash: experiment.UserHash("u2"), Bucket: "off", Version: f.Version, At: now},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddTrackBatch(ctx, "track-batch-1", now, []experiment.TrackedEvent{{Metric: "purchase", UserHash: experiment.UserHash("u1"), Value: 12.5, At: now}}); err != nil {
		t.Fatal(err)
	}
	// The experiment's history and its dropped first exposures.
	if err := db.SaveResultsSnapshot(ctx, "exp-1", now, []byte(`{"at":"2026-01-01T00:00:00Z","lifts":{"purchase":{"off":{"value":0.1,"ci":[-0.2,0.4]}}}}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.AddDroppedExposures(ctx, map[string]int64{"exp-1": 2}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.ClaimIdempotency(ctx, idempotency.Record{Scope: "tok", Key: "k1", Fingerprint: "fp", Attempt: "a1",
		LeaseUntil: now.Add(time.Minute), Expires: now.Add(24 * time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// targetedFeature is a feature with every kind of targeting: overrides,
// rules (in_segment, an attribute's condition, the ring by another
// attribute) and bucket_by.
func targetedFeature(key string) feature.Feature {
	return feature.Feature{
		Key: key, Enabled: true, Fallback: "off", BucketBy: "account",
		Buckets:   []feature.Bucket{{Name: "off", Replicas: 40}, {Name: "on", Replicas: 10}, {Name: "beta", Replicas: 20}},
		Overrides: map[string]string{"user:3": "beta", "vip": "on"},
		Rules: []feature.Rule{
			{Name: "staff", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"staff"`)}}, Serve: feature.Serve{Bucket: "on"}},
			{Name: "paying", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"pro"`)}, {Attribute: "country", Op: feature.OpIn, Value: json.RawMessage(`["de","fr"]`)}},
				Serve: feature.Serve{Ring: true, BucketBy: "org"}},
		},
	}
}

// µs compares times to the microsecond, all PostgreSQL keeps of history,
// token, audit and webhook times (a feature's own times, in its JSON, are
// kept exactly).
// A report's populations keep in memory what they were computed from,
// which the store does not keep.
var µs = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond)) }),
	cmpopts.IgnoreUnexported(feature.PopulationChange{}),
}

// storeContents is what the service reads of a database, through the
// store's methods: a check of the copy that does not go through
// store.Compare.
type storeContents struct {
	Features, Archived []feature.Feature
	Versions           map[string][]rollout.Version
	Exposures          map[string][]feature.Exposure
	RuleExposures      map[string][]feature.Exposure
	ExposureUsers      map[string][]feature.Exposure
	Users              map[string][]history.Assignment
	Segments           []feature.Segment
	SegmentVersions    map[string][]feature.SegmentVersion
	SegmentUsers       map[string][]string
	Changes            []rollout.Version
	Tokens             []auth.Token
	Ramps              []ramp.Ramp
	Settings           settings.Settings
	Requests           []request.Request
	Audit              []audit.Event
	Webhooks           []webhook.Hook
	Deliveries         map[string][]webhook.Delivery
	Revision           int64
	Commits            []rollout.Commit
	SessionKey         []byte
	EndedSessions      []string
	Environments       []rollout.Environment
	// Staging is what the environment staging holds, where it exists.
	Staging *storeContents
}

func contents(t *testing.T, s *store.DB) storeContents {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	c := storeContents{Versions: map[string][]rollout.Version{}, Exposures: map[string][]feature.Exposure{}, RuleExposures: map[string][]feature.Exposure{}, ExposureUsers: map[string][]feature.Exposure{},
		Users: map[string][]history.Assignment{}, SegmentVersions: map[string][]feature.SegmentVersion{}, SegmentUsers: map[string][]string{}, Deliveries: map[string][]webhook.Delivery{}}
	var err error
	c.Features, err = s.Features(ctx)
	must(err)
	c.Archived, err = s.ArchivedFeatures(ctx)
	must(err)
	svc, err := rollout.NewService(ctx, s, nil)
	must(err)
	for i, f := range append(slices.Clone(c.Features), c.Archived...) {
		c.Versions[f.Key], err = s.Versions(ctx, f.Key, 0, 0)
		must(err)
		c.Exposures[f.Key], err = s.Exposures(ctx, f.Key)
		must(err)
		c.RuleExposures[f.Key], err = s.RuleExposures(ctx, f.Key, time.Time{})
		must(err)
		c.ExposureUsers[f.Key], err = s.ExposureUsers(ctx, f.Key, time.Time{})
		must(err)
		if i >= len(c.Features) { // archived: not served
			continue
		}
		for _, user := range []string{"user1", "user:7", "user:42"} {
			c.Users[f.Key+" "+user], _, err = svc.UserHistory(ctx, f.Key, user, 0, rollout.MaxHistoryPage)
			must(err)
		}
	}
	c.Segments, err = s.Segments(ctx)
	must(err)
	for _, seg := range c.Segments {
		c.SegmentVersions[seg.Key], err = s.SegmentVersions(ctx, seg.Key, 0, 0)
		must(err)
		c.SegmentUsers[seg.Key], err = s.SegmentUsers(ctx, seg.Key)
		must(err)
	}
	c.Changes, err = s.Changes(ctx, rollout.ChangeQuery{})
	must(err)
	c.Tokens, err = s.Tokens(ctx)
	must(err)
	c.Ramps, err = s.Ramps(ctx, "")
	must(err)
	c.Settings, err = s.Settings(ctx)
	must(err)
	c.Requests, err = s.Requests(ctx, request.Query{})
	must(err)
	c.Audit, err = s.AuditEvents(ctx, audit.Query{Ascending: true})
	must(err)
	c.Webhooks, err = s.Webhooks(ctx)
	must(err)
	for _, h := range c.Webhooks {
		c.Deliveries[h.ID], err = s.WebhookDeliveries(ctx, h.ID, 0)
		must(err)
	}
	c.Revision, err = s.Revision(ctx)
	must(err)
	c.Commits, err = s.Commits(ctx, 0, 0)
	must(err)
	c.SessionKey, err = s.SessionKey(ctx)
	must(err)
	c.EndedSessions, err = s.EndedSessions(ctx, time.Now())
	must(err)
	c.Environments, err = s.Environments(ctx)
	must(err)
	if s.Environment() == rollout.Production && slices.ContainsFunc(c.Environments, func(e rollout.Environment) bool { return e.Key == "staging" }) {
		st := s.In("staging")
		c.Staging = &storeContents{Versions: map[string][]rollout.Version{}}
		c.Staging.Features, err = st.Features(ctx)
		must(err)
		for _, f := range c.Staging.Features {
			c.Staging.Versions[f.Key], err = st.Versions(ctx, f.Key, 0, 0)
			must(err)
		}
		c.Staging.Changes, err = st.Changes(ctx, rollout.ChangeQuery{})
		must(err)
		c.Staging.Settings, err = st.Settings(ctx)
		must(err)
		c.Staging.Commits, err = st.Commits(ctx, 0, 0)
		must(err)
	}
	return c
}

// wantSame fails t unless got holds what want holds, and each secret
// authenticates against got exactly when it should.
func wantSame(t *testing.T, want, got *store.DB, secrets map[string]bool) {
	t.Helper()
	if diff := cmp.Diff(contents(t, want), contents(t, got), µs); diff != "" {
		t.Errorf("target differs from source (-source +target):\n%s", diff)
	}
	tokens, err := auth.NewTokens(context.Background(), got, nil)
	if err != nil {
		t.Fatal(err)
	}
	for secret, active := range secrets {
		if _, ok := tokens.Authenticate(secret); ok != active {
			t.Errorf("Authenticate(%.8s…) = %v, want %v", secret, ok, active)
		}
	}
}

// copiedRows reads the rows per table that rollout migrate printed.
func copiedRows(t *testing.T, stdout string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, table := range store.CopiedTables() {
		m := regexp.MustCompile(`(?m)^  ` + table + ` +(\d+)$`).FindStringSubmatch(stdout)
		if m == nil {
			t.Errorf("rollout migrate printed %q, without the rows of table %s", stdout, table)
			continue
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		out[table] = n
	}
	return out
}

// TestMigrateSQLiteToPostgresAndBack migrates a database made by the
// service, with a row in every table, into PostgreSQL, checks everything
// arrived and that the target goes on where the source stood, refuses a
// second migration into it, and migrates it back into a new SQLite file.
func TestMigrateSQLiteToPostgresAndBack(t *testing.T) {
	ctx := context.Background()
	path, secrets := serviceDatabase(t)
	dsn := storetest.PostgresDSN(t)

	// The flags in either order.
	stdout, stderr, err := runCLI(t, "migrate", "--to", dsn, "--from", path)
	if err != nil {
		t.Fatalf("rollout migrate: %v\n%s%s", err, stdout, stderr)
	}
	for table, n := range copiedRows(t, stdout) {
		if n == 0 {
			t.Errorf("table %s: 0 rows copied; the source is meant to have some in every table", table)
		}
	}
	if !strings.Contains(stdout, "Verified") || !strings.Contains(stdout, "write_probe") {
		t.Errorf("rollout migrate printed %q, want Verified and the tables not copied", stdout)
	}
	src, pg := openSQLite(t, path), openPostgres(t, dsn)
	c := contents(t, src)
	if c.Staging == nil || len(c.Staging.Features) != len(c.Features) || len(c.Staging.Versions["banner"]) != 2 {
		t.Fatalf("the source's staging is not what the test made: %+v", c.Staging)
	}
	if len(c.Features) != 4 || len(c.Versions["checkout"]) != 5 || len(c.Tokens) != 4 || len(c.Ramps) != 2 || len(c.Segments) != 3 || len(c.SegmentUsers["testers"]) != 4 ||
		len(c.Archived) != 1 || len(c.Requests) != 2 || c.Settings.MaxChurn != 0.1 || len(c.Webhooks) != 1 || len(c.Deliveries[c.Webhooks[0].ID]) != 1 ||
		len(c.RuleExposures["gated"]) == 0 || len(c.ExposureUsers["checkout"]) == 0 || len(c.EndedSessions) != 1 {
		t.Fatalf("the source is not what the test made: %+v", c)
	}
	wantSame(t, src, pg, secrets)
	if hs, err := pg.Webhooks(ctx); err != nil || len(hs) != 1 || hs[0].Secret != "whsec-0123456789-sekrit" {
		t.Errorf("target's webhooks = %+v, %v; want the one with its secret", hs, err)
	}

	// The target goes on where the source stood: the next change takes
	// the next revision, version sequence and audit event ID.
	before := contents(t, pg)
	svc, err := rollout.NewService(ctx, pg, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A change of production alone (a description would be written to
	// staging's copy of the feature too, and take two revisions).
	off := false
	if _, err := svc.Change(ctx, "search", change.Patch(nil, &off, nil), rollout.ChangeOptions{Actor: "ada"}); err != nil {
		t.Fatalf("a change after the move = %v", err)
	}
	after := contents(t, pg)
	if after.Revision != before.Revision+1 {
		t.Errorf("revision after a change = %d, want %d", after.Revision, before.Revision+1)
	}
	if got, prev := after.Changes[0].Seq, before.Changes[0].Seq; got <= prev {
		t.Errorf("the new version's Seq = %d, want it above the copied %d", got, prev)
	}
	if got, prev := after.Audit[len(after.Audit)-1].ID, before.Audit[len(before.Audit)-1].ID; got <= prev {
		t.Errorf("the new audit event's ID = %d, want it above the copied %d", got, prev)
	}

	// A second migration into the now non-empty target is refused and
	// changes nothing.
	if _, _, err := runCLI(t, "migrate", "--from", path, "--to", dsn); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("second migrate = %v, want a refusal of the non-empty target", err)
	}
	if diff := cmp.Diff(after, contents(t, pg), µs); diff != "" {
		t.Errorf("a refused migrate changed the target (-before +after):\n%s", diff)
	}

	// PostgreSQL → SQLite gives the same data back.
	back := filepath.Join(t.TempDir(), "back.db")
	if stdout, stderr, err := runCLI(t, "migrate", "--from", dsn, "--to", back); err != nil {
		t.Fatalf("rollout migrate back: %v\n%s%s", err, stdout, stderr)
	}
	wantSame(t, pg, openSQLite(t, back), secrets)
}

// TestMigrateRefuses checks the command's refusals: each changes nothing.
func TestMigrateRefuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "source.db")
	createToken(t, src, "a", "admin")
	// Non-empty targets: a token; only a commit (a feature made and
	// purged).
	withToken := filepath.Join(dir, "token.db")
	createToken(t, withToken, "b", "viewer")
	withCommit := filepath.Join(dir, "commit.db")
	db := openSQLite(t, withCommit)
	f := feature.Feature{Key: "f", Buckets: []feature.Bucket{{Name: "A", Replicas: 1}}, Version: 1}
	if err := db.CreateFeature(ctx, f, rollout.Version{Version: 1, Config: f}); err != nil {
		t.Fatal(err)
	}
	if err := db.ArchiveFeature(ctx, "f", 1, audit.Event{Actor: "test"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.PurgeFeature(ctx, "f", audit.Event{Actor: "test"}, nil); err != nil {
		t.Fatal(err)
	}
	db.Close()
	missing := filepath.Join(dir, "missing.db")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing source", []string{"--from", missing, "--to", filepath.Join(dir, "new.db")}, "does not exist"},
		{"target with a token", []string{"--from", src, "--to", withToken}, "not empty (rows: tokens 1, commits 1, audit_events 1)"},
		{"target with a commit", []string{"--from", src, "--to", withCommit}, "not empty (rows: commits 3, audit_events 3)"},
		{"no target", []string{"--from", src}, "give both"},
		{"no source", []string{"--to", src}, "give both"},
		{"an argument", []string{"--from", src, "--to", withToken, "extra"}, "takes no arguments"},
		{"unknown flag", []string{"--db", src}, "not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := runCLI(t, append([]string{"migrate"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rollout migrate %q = %v, want an error saying %q", tc.args, err, tc.want)
			}
			if tc.want == "give both" && !strings.Contains(stderr, "usage: rollout migrate") {
				t.Errorf("stderr = %q, want the usage", stderr)
			}
		})
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after migrating from a missing file, Stat = %v, want it still missing", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused migrate made its target: Stat = %v", err)
	}
	for _, path := range []string{withToken, withCommit} {
		db := openSQLite(t, path)
		if rev, err := db.Revision(ctx); err != nil || rev > 3 {
			t.Errorf("%s: after a refused migrate Revision() = %d, %v, want it unchanged", path, rev, err)
		}
		if tokens, err := db.Tokens(ctx); err != nil || len(tokens) > 1 {
			t.Errorf("%s: after a refused migrate %d tokens (%v), want none copied", path, len(tokens), err)
		}
	}

	stdout, _, err := runCLI(t, "migrate", "-h")
	if err != nil || !strings.Contains(stdout, "usage: rollout migrate --from SOURCE --to TARGET") || !strings.Contains(stdout, "-from") {
		t.Errorf("rollout migrate -h = %q, %v, want the help on stdout and no error", stdout, err)
	}
}

// TestMigrateVerifyFindsDifferences copies a database, changes the copy in
// one way at a time and checks that verification reports it, and does not
// say the databases are equal.
func TestMigrateVerifyFindsDifferences(t *testing.T) {
	ctx := context.Background()
	path, _ := serviceDatabase(t)
	src := openSQLite(t, path)

	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dst *store.DB, raw *sql.DB) error
		want   []string
	}{
		{"nothing", func(*testing.T, *store.DB, *sql.DB) error { return nil }, nil},
		{"a segment deleted", func(t *testing.T, dst *store.DB, raw *sql.DB) error {
			// What rollout migrate did before it copied segments.
			_, err := raw.ExecContext(ctx, `DELETE FROM segments WHERE key = 'staff'`)
			return err
		}, []string{`table segments: row (key="staff") is missing from the target`, `table segment_versions: row (segment_key="staff", version=1) is missing from the target`}},
		{"a webhook's secret changed", func(t *testing.T, dst *store.DB, raw *sql.DB) error {
			_, err := raw.ExecContext(ctx, `UPDATE webhooks SET secret = 'other'`)
			return err
		}, []string{`table webhooks: row (id=`}},
		{"evaluations counted", func(t *testing.T, dst *store.DB, raw *sql.DB) error {
			f, err := dst.Feature(ctx, "checkout")
			if err != nil {
				return err
			}
			return dst.AddExposures(ctx, []feature.Exposure{{FeatureID: f.ID, Version: 1, Bucket: "A", Count: 1}})
		}, []string{`table exposures: row (feature_id=`}},
		{"a token revoked", func(t *testing.T, dst *store.DB, raw *sql.DB) error {
			return dst.RevokeToken(ctx, "admin", time.Now(), "test")
		}, []string{`table tokens: row (id=`, "table revision: row (id=1) differs: revision: source", "table commits: row (revision=", "table audit_events: row (id="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dstPath := filepath.Join(t.TempDir(), "copy.db")
			dst := openSQLite(t, dstPath)
			if _, err := store.Copy(ctx, src, dst); err != nil {
				t.Fatalf("Copy = %v", err)
			}
			// The store's own connections, for changes no method makes.
			raw, err := sql.Open("sqlite3", "file:"+dstPath+"?_foreign_keys=on&_busy_timeout=5000")
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if err := tc.change(t, dst, raw); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			err = verify(ctx, src, dst, "source", "target", len(store.CopiedTables()), &stdout, &stderr)
			switch {
			case len(tc.want) == 0 && (err != nil || !strings.Contains(stdout.String(), "Verified")):
				t.Errorf("verify = %v, printed %q %q, want no mismatch", err, stdout.String(), stderr.String())
			case len(tc.want) > 0 && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("differ in %d places", len(tc.want)))):
				t.Errorf("verify = %v, printed %q, want an error counting %d mismatches", err, stderr.String(), len(tc.want))
			case len(tc.want) > 0 && strings.Contains(stdout.String(), "Verified"):
				t.Errorf("verify printed %q despite differences", stdout.String())
			}
			got := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if len(tc.want) == 0 {
				got = nil
			}
			if len(got) != len(tc.want) {
				t.Errorf("verify printed %q, want %d mismatches like %q", stderr.String(), len(tc.want), tc.want)
			}
			for i, want := range tc.want {
				if i < len(got) && !strings.HasPrefix(strings.TrimPrefix(got[i], "mismatch: "), want) {
					t.Errorf("mismatch %d = %q, want it to start %q", i, got[i], want)
				}
			}
		})
	}
}

// TestMigrateExposureTotals: migrate copies exposures hour by hour, totals
// that saturated at the largest int64 and totals kept before hours were
// (hour 0) included.
func TestMigrateExposureTotals(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rollout.db")
	src := openSQLite(t, path)
	svc, err := rollout.NewService(ctx, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, feature.Feature{Key: "f", Enabled: true, Buckets: []feature.Bucket{{Name: "A", Replicas: 3}, {Name: "B", Replicas: 3}}}, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	f, _ := svc.Snapshot().Feature("f")
	h := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := src.AddExposures(ctx, []feature.Exposure{
		{FeatureID: f.ID, Version: 1, Bucket: "A", Count: 7},
		{FeatureID: f.ID, Version: 1, Bucket: "A", Hour: h, Count: math.MaxInt64},
		{FeatureID: f.ID, Version: 1, Bucket: "A", Hour: h, Count: 5}, // saturates
		{FeatureID: f.ID, Version: 1, Bucket: "B", Hour: h.Add(time.Hour), Count: 3},
	}); err != nil {
		t.Fatal(err)
	}
	dsn := storetest.PostgresDSN(t)
	stdout, stderr, err := runCLI(t, "migrate", "--from", path, "--to", dsn)
	if err != nil {
		t.Fatalf("rollout migrate: %v\n%s%s", err, stdout, stderr)
	}
	if rows := copiedRows(t, stdout); rows["exposures"] != 3 || !strings.Contains(stdout, "Verified") {
		t.Errorf("rollout migrate printed %q, want 3 rows of exposures and Verified", stdout)
	}
	want, err := src.Exposures(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	got, err := openPostgres(t, dsn).Exposures(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 3 {
		t.Errorf("source exposures = %+v, want 3 totals", want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exposures in PostgreSQL differ (-source +target):\n%s", diff)
	}
}

// TestMigrateKeepsSegmentRules is a user served "on" by a rule using a
// segment before a move, over HTTP, and served the same after the move to
// PostgreSQL and back.
func TestMigrateKeepsSegmentRules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollout.db")
	s := startServer(t, path)
	s.must(201, "POST", "/api/segments", map[string]any{"key": "staff", "conditions": []any{map[string]any{"attribute": "email", "op": "ends_with", "value": "@example.com"}}})
	s.must(201, "POST", "/api/features", map[string]any{"key": "gated", "buckets": []any{map[string]any{"name": "off", "replicas": 1}, map[string]any{"name": "on", "replicas": 0}}})
	s.must(200, "PUT", "/api/features/gated/rules", map[string]any{"rules": []any{map[string]any{"name": "staff",
		"conditions": []any{map[string]any{"op": "in_segment", "value": "staff"}}, "serve": map[string]any{"bucket": "on"}}}})
	ask := map[string]any{"user": "ada", "features": []string{"gated"}, "context": map[string]any{"email": "ada@example.com"}}
	served := func(s *server) string {
		t.Helper()
		r := s.must(200, "POST", "/evaluate", ask)["results"].(map[string]any)["gated"].(map[string]any)
		return fmt.Sprint(r["bucket"], " ", r["reason"])
	}
	before := served(s)
	if before != "on targeting_match" {
		t.Fatalf("before the move ada gets %q, want on by the rule", before)
	}
	s.stop()
	dsn := storetest.PostgresDSN(t)
	if stdout, stderr, err := runCLI(t, "migrate", "--from", path, "--to", dsn); err != nil {
		t.Fatalf("rollout migrate: %v\n%s%s", err, stdout, stderr)
	}
	back := filepath.Join(t.TempDir(), "back.db")
	if stdout, stderr, err := runCLI(t, "migrate", "--from", dsn, "--to", back); err != nil {
		t.Fatalf("rollout migrate back: %v\n%s%s", err, stdout, stderr)
	}
	for _, db := range []string{dsn, back} {
		s := startServer(t, db)
		if got := served(s); got != before {
			t.Errorf("after the move to %s ada gets %q, want %q", serve.RedactDSN(db), got, before)
		}
		s.stop()
	}
}

// TestMigrateEvaluatesAlike evaluates 10,000 users with random contexts on
// features with overrides, rules using segments and attributes, and
// bucket_by, before and after a move to PostgreSQL and back: every answer
// is the same.
func TestMigrateEvaluatesAlike(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rollout.db")
	src := openSQLite(t, path)
	svc, err := rollout.NewService(ctx, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	fillTargeting(t, svc, src)
	plain := targetedFeature("plain")
	plain.BucketBy, plain.Rules = "", plain.Rules[:1]
	if _, err := svc.Create(ctx, plain, rollout.ChangeOptions{Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	dsn := storetest.PostgresDSN(t)
	if stdout, stderr, err := runCLI(t, "migrate", "--from", path, "--to", dsn); err != nil {
		t.Fatalf("rollout migrate: %v\n%s%s", err, stdout, stderr)
	}
	back := filepath.Join(t.TempDir(), "back.db")
	if stdout, stderr, err := runCLI(t, "migrate", "--from", dsn, "--to", back); err != nil {
		t.Fatalf("rollout migrate back: %v\n%s%s", err, stdout, stderr)
	}
	snaps := map[string]*feature.Snapshot{}
	for name, db := range map[string]*store.DB{"postgres": openPostgres(t, dsn), "back": openSQLite(t, back)} {
		s, err := rollout.NewService(ctx, db, nil)
		if err != nil {
			t.Fatal(err)
		}
		snaps[name] = s.Snapshot()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	reasons := map[string]int{}
	for i := range 10_000 {
		user := fmt.Sprint("user:", i)
		if i%1000 == 3 {
			user = pick("vip", "user:3")
		}
		c := feature.Context{
			"email":   pick(fmt.Sprintf("u%d@example.com", i), fmt.Sprintf("u%d@else.org", i)),
			"plan":    pick("free", "pro", "enterprise"),
			"country": pick("de", "fr", "us"),
			"account": fmt.Sprint("acct", rng.IntN(500)),
			"org":     fmt.Sprint("org", rng.IntN(50)),
		}
		if rng.IntN(10) == 0 {
			delete(c, "account") // bucket_by's attribute missing: the default
		}
		for _, key := range []string{"gated", "plain"} {
			want, err := svc.Snapshot().PeekContext(key, user, c)
			if err != nil {
				t.Fatal(err)
			}
			reasons[key+" "+want.Reason]++
			for name, snap := range snaps {
				got, err := snap.PeekContext(key, user, c)
				if err != nil {
					t.Fatal(err)
				}
				if got.Bucket != want.Bucket || got.Reason != want.Reason || got.Rule != want.Rule || got.Version != want.Version {
					t.Fatalf("%s: %s with %v gets %s (%s %s) in %s, %s (%s %s) before the move", key, user, c, got.Bucket, got.Reason, got.Rule, name, want.Bucket, want.Reason, want.Rule)
				}
			}
		}
	}
	t.Logf("answers compared, by feature and reason: %v", reasons)
	for _, want := range []string{"gated " + feature.ReasonTargetingMatch, "gated " + feature.ReasonOverride, "plain " + feature.ReasonTargetingMatch} {
		if reasons[want] == 0 {
			t.Errorf("no answer of %q among %v: the test does not exercise it", want, reasons)
		}
	}
}
