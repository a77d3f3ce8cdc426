package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/postgres"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/store/storetest"
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
	s.stop() // flushes the evaluation counts

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

// storeContents is everything migrate copies, read through the Store
// interfaces, with the user look-ups the service answers from it.
type storeContents struct {
	Features  []rollout.Feature
	Archived  []rollout.Feature
	Versions  map[string][]rollout.Version
	Exposures map[string][]rollout.Exposure
	Users     map[string][]rollout.Assignment // by feature key and user
	Tokens    []rollout.Token
	Ramps     []rollout.Ramp
}

// contents reads s. Times of history entries and tokens are cut to the
// microsecond, all PostgreSQL keeps of them; a feature's own times are
// compared exactly.
func contents(t *testing.T, s migrationStore) storeContents {
	t.Helper()
	ctx := context.Background()
	c := storeContents{Versions: map[string][]rollout.Version{}, Exposures: map[string][]rollout.Exposure{}, Users: map[string][]rollout.Assignment{}}
	var err error
	if c.Features, err = s.Features(ctx); err != nil {
		t.Fatal(err)
	}
	svc, err := rollout.NewService(ctx, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Archived, err = s.ArchivedFeatures(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range c.Archived {
		vs, err := s.Versions(ctx, f.Key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range vs {
			vs[i].Time = vs[i].Time.Truncate(time.Microsecond)
		}
		c.Versions["archived "+f.Key] = vs
		if c.Exposures["archived "+f.Key], err = s.Exposures(ctx, f.Key); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range c.Features {
		vs, err := s.Versions(ctx, f.Key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range vs {
			vs[i].Time = vs[i].Time.Truncate(time.Microsecond)
		}
		c.Versions[f.Key] = vs
		if c.Exposures[f.Key], err = s.Exposures(ctx, f.Key); err != nil {
			t.Fatal(err)
		}
		for _, user := range []string{"user1", "user:7", "user:42"} {
			as, _, err := svc.UserHistory(ctx, f.Key, user, 0, rollout.MaxHistoryPage)
			if err != nil {
				t.Fatal(err)
			}
			for i := range as {
				as[i].Time = as[i].Time.Truncate(time.Microsecond)
			}
			c.Users[f.Key+" "+user] = as
		}
	}
	if c.Tokens, err = s.Tokens(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Ramps, err = s.Ramps(ctx, ""); err != nil {
		t.Fatal(err)
	}
	for i, tok := range c.Tokens {
		c.Tokens[i].CreatedAt = tok.CreatedAt.Truncate(time.Microsecond)
		if tok.RevokedAt != nil {
			at := tok.RevokedAt.Truncate(time.Microsecond)
			c.Tokens[i].RevokedAt = &at
		}
	}
	return c
}

// wantSame fails t unless got holds what want holds, and each secret
// authenticates against got exactly when it should.
func wantSame(t *testing.T, want, got migrationStore, secrets map[string]bool) {
	t.Helper()
	if diff := cmp.Diff(contents(t, want), contents(t, got)); diff != "" {
		t.Errorf("target differs from source (-source +target):\n%s", diff)
	}
	tokens, err := rollout.NewTokens(context.Background(), got, nil)
	if err != nil {
		t.Fatal(err)
	}
	for secret, active := range secrets {
		if _, ok := tokens.Authenticate(secret); ok != active {
			t.Errorf("Authenticate(%.8s…) = %v, want %v", secret, ok, active)
		}
	}
}

// TestMigrateSQLiteToPostgresAndBack migrates a database made by the
// service into PostgreSQL, checks everything arrived, refuses a second
// migration into it, and migrates it back into a new SQLite file.
func TestMigrateSQLiteToPostgresAndBack(t *testing.T) {
	ctx := context.Background()
	path, secrets := serviceDatabase(t)
	dsn := storetest.PostgresDSN(t)

	// The flags in either order.
	stdout, stderr, err := runCLI(t, "migrate", "--to", dsn, "--from", path)
	if err != nil {
		t.Fatalf("rollout migrate: %v\n%s%s", err, stdout, stderr)
	}
	for _, want := range []string{"features   3 (10 versions)", "archived   1 features", "tokens     4 (2 revoked)", "exposures  300 evaluations", "ramps      2", "Verified"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("rollout migrate printed %q, want it to say %q", stdout, want)
		}
	}
	src, pg := openSQLite(t, path), openPostgres(t, dsn)
	c := contents(t, src)
	if len(c.Features) != 3 || len(c.Versions["checkout"]) != 5 || len(c.Tokens) != 4 || c.Features[0].Enabled || len(c.Ramps) != 2 ||
		len(c.Archived) != 1 || c.Archived[0].Key != "gone" || len(c.Exposures["archived gone"]) == 0 {
		t.Fatalf("the source is not what the test made: %d features, %d versions of checkout, %d tokens, banner enabled %v",
			len(c.Features), len(c.Versions["checkout"]), len(c.Tokens), c.Features[0].Enabled)
	}
	wantSame(t, src, pg, secrets)

	// A second migration into the now non-empty target is refused and
	// changes nothing.
	before := contents(t, pg)
	rev, err := pg.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "migrate", "--from", path, "--to", dsn); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("second migrate = %v, want a refusal of the non-empty target", err)
	}
	if diff := cmp.Diff(before, contents(t, pg)); diff != "" {
		t.Errorf("a refused migrate changed the target (-before +after):\n%s", diff)
	}
	if after, err := pg.Revision(ctx); err != nil || after != rev {
		t.Errorf("after a refused migrate Revision() = %d, %v, want %d", after, err, rev)
	}

	// PostgreSQL → SQLite gives the same data back.
	back := filepath.Join(t.TempDir(), "back.db")
	if stdout, stderr, err := runCLI(t, "migrate", "--from", dsn, "--to", back); err != nil {
		t.Fatalf("rollout migrate back: %v\n%s%s", err, stdout, stderr)
	}
	wantSame(t, src, openSQLite(t, back), secrets)
}

// TestMigrateRefuses checks the command's refusals: each changes nothing.
func TestMigrateRefuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "source.db")
	createToken(t, src, "a", "admin")
	// Non-empty targets: a token; only a commit (a feature made and
	// deleted).
	withToken := filepath.Join(dir, "token.db")
	createToken(t, withToken, "b", "viewer")
	withCommit := filepath.Join(dir, "commit.db")
	db := openSQLite(t, withCommit)
	f := rollout.Feature{Key: "f", Buckets: []rollout.Bucket{{Name: "A", Replicas: 1}}, Version: 1}
	if err := db.CreateFeature(ctx, f, rollout.Version{Version: 1, Config: f}); err != nil {
		t.Fatal(err)
	}
	if err := db.ArchiveFeature(ctx, "f", 1, rollout.AuditEvent{Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := db.PurgeFeature(ctx, "f", rollout.AuditEvent{Actor: "test"}); err != nil {
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
		{"target with a token", []string{"--from", src, "--to", withToken}, "not empty (0 features, 1 tokens, 1 commits)"},
		{"target with a commit", []string{"--from", src, "--to", withCommit}, "not empty (0 features, 0 tokens, 3 commits)"},
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
// one way at a time and checks that verification reports it.
func TestMigrateVerifyFindsDifferences(t *testing.T) {
	ctx := context.Background()
	path, _ := serviceDatabase(t)
	src := openSQLite(t, path)
	sum := func(key string, s migrationStore) int64 {
		t.Helper()
		es, err := s.Exposures(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, e := range es {
			n += e.Count
		}
		return n
	}
	if sum("checkout", src) == 0 {
		t.Fatal("the source has no evaluation counts of checkout: the service did not flush them")
	}

	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dst migrationStore) error
		want   []string
	}{
		{"nothing", func(*testing.T, migrationStore) error { return nil }, nil},
		{"a feature changed", func(t *testing.T, dst migrationStore) error {
			f, err := dst.Feature(ctx, "search")
			if err != nil {
				return err
			}
			f.Version++
			f.Description = "changed"
			return dst.UpdateFeature(ctx, f, rollout.Version{Version: f.Version, Config: f})
		}, []string{`feature "search": current configuration differs`, `feature "search": source has 2 versions, target has 3`}},
		{"a feature archived", func(t *testing.T, dst migrationStore) error {
			return dst.ArchiveFeature(ctx, "banner", 2, rollout.AuditEvent{Actor: "test"})
		}, []string{"features: source has 3, target has 2", `feature "banner": missing from the target`, `archived feature "banner": in the target only`}},
		{"a feature added", func(t *testing.T, dst migrationStore) error {
			f := rollout.Feature{Key: "extra", Buckets: []rollout.Bucket{{Name: "A", Replicas: 1}}, Version: 1}
			return dst.CreateFeature(ctx, f, rollout.Version{Version: 1, Config: f})
		}, []string{"features: source has 3, target has 4", `feature "extra": in the target only`}},
		{"evaluations counted", func(t *testing.T, dst migrationStore) error {
			f, err := dst.Feature(ctx, "checkout")
			if err != nil {
				return err
			}
			return dst.AddExposures(ctx, []rollout.Exposure{{FeatureID: f.ID, Version: 1, Bucket: "A", Count: 1}})
		}, []string{fmt.Sprintf(`feature "checkout": source counts %d evaluations, target %d`, sum("checkout", src), sum("checkout", src)+1)}},
		{"a token revoked", func(t *testing.T, dst migrationStore) error {
			return dst.RevokeToken(ctx, "admin", time.Now(), "test")
		}, []string{`token "admin" (`}},
		{"a token added", func(t *testing.T, dst migrationStore) error {
			return dst.CreateToken(ctx, rollout.Token{Name: "new", Role: rollout.Role("viewer"), Hash: "h", CreatedAt: time.Now()})
		}, []string{"tokens: source has 4, target has 5", `token "new" (`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := openSQLite(t, filepath.Join(t.TempDir(), "copy.db"))
			if _, err := migrateStores(ctx, src, dst); err != nil {
				t.Fatalf("migrateStores = %v", err)
			}
			if err := tc.change(t, dst); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			err := verify(ctx, src, dst, "source", "target", &stdout, &stderr)
			switch {
			case len(tc.want) == 0 && (err != nil || !strings.Contains(stdout.String(), "Verified")):
				t.Errorf("verify = %v, printed %q %q, want no mismatch", err, stdout.String(), stderr.String())
			case len(tc.want) > 0 && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("differ in %d places", len(tc.want)))):
				t.Errorf("verify = %v, want an error counting %d mismatches", err, len(tc.want))
			}
			got := strings.Split(strings.TrimSpace(stderr.String()), "\nmismatch: ")
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
// (hour 0) included, and reports their sum saturated rather than
// overflowed.
func TestMigrateExposureTotals(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rollout.db")
	src := openSQLite(t, path)
	svc, err := rollout.NewService(ctx, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, rollout.Feature{Key: "f", Enabled: true, Buckets: []rollout.Bucket{{Name: "A", Replicas: 3}, {Name: "B", Replicas: 3}}}, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	f, _ := svc.Snapshot().Feature("f")
	h := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := src.AddExposures(ctx, []rollout.Exposure{
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
	if want := fmt.Sprintf("exposures  %d evaluations", int64(math.MaxInt64)); !strings.Contains(stdout, want) || !strings.Contains(stdout, "Verified") {
		t.Errorf("rollout migrate printed %q, want it to say %q and Verified", stdout, want)
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
