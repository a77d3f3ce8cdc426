package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mattn/go-sqlite3"

	"github.com/rollout/rollout/migrations"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
)

var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// newFeature returns a feature at version 1 with every field set.
func newFeature(key string) feature.Feature {
	return feature.Feature{
		ID:          "id-" + key,
		Key:         key,
		Description: "checkout <b>flow</b> & more",
		Enabled:     true,
		Salt:        "s1",
		Fallback:    "control",
		Buckets: []feature.Bucket{
			{Name: "control", Replicas: 100},
			{Name: "treatment", Replicas: 50, Value: json.RawMessage(`{"color":"<red>","n":[1,2.5,null]}`)},
			{Name: "off", Replicas: 1, Value: json.RawMessage(`false`)},
		},
		Overrides: map[string]string{"alice": "treatment", "bob@example.com": "control"},
		Version:   1,
		CreatedAt: t0,
		UpdatedAt: t0,
	}
}

// next returns f changed into its next version at time at.
func next(f feature.Feature, at time.Time) feature.Feature {
	g := f.Clone()
	g.Version++
	g.UpdatedAt = at
	g.Buckets[1].Replicas += 10
	g.Description = fmt.Sprintf("version %d", g.Version)
	return g
}

// versionOf returns the history entry of the change from before to after.
func versionOf(before, after feature.Feature) rollout.Version {
	return rollout.Version{
		Version:       after.Version,
		Actor:         "ops@example.com",
		Time:          after.UpdatedAt,
		Summary:       fmt.Sprintf("change %d", after.Version),
		Config:        after,
		OverrideCount: len(after.Overrides),
		Report: feature.Report{
			FromVersion: before.Version, ToVersion: after.Version, Method: feature.MethodExact, Churn: 0.125,
			Moves:        []feature.Move{{From: "A", To: "B", Share: 0.125}},
			SharesBefore: map[string]float64{"A": 0.5, "B": 0.5}, SharesAfter: map[string]float64{"A": 0.375, "B": 0.625},
			OverrideChanges: []feature.OverrideChange{{User: "alice", From: nil, To: ptr("B")}, {User: "bob", From: ptr("A"), To: nil}},
		},
	}
}

// DB is a store with the pools of its file, to look inside.
type DB struct {
	*store.DB
	*file
}

func openTest(t *testing.T, path string) *DB {
	t.Helper()
	db, f, err := open(context.Background(), path, busyTimeout)
	if err != nil {
		t.Fatalf("Open(%q) = %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return &DB{db, f}
}

// openDB is Open with the pools.
func openDB(ctx context.Context, path string) (*DB, error) {
	db, f, err := open(ctx, path, busyTimeout)
	if err != nil {
		return nil, err
	}
	return &DB{db, f}, nil
}

// extended returns the extended code of a constraint violation, or 0.
func extended(err error) sqlite3.ErrNoExtended {
	if se, ok := errors.AsType[sqlite3.Error](err); ok && se.Code == sqlite3.ErrConstraint {
		return se.ExtendedCode
	}
	return 0
}

// wrapErr wraps err as the store does with this package's dialect.
func wrapErr(err error, format string, args ...any) error {
	d := store.Dialect{Unavailable: unavailable, Constraint: constraint}
	return d.WrapErr(err, format, args...)
}

func newDB(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rollout.db")
	return openTest(t, path), path
}

// create stores f with its creation entry and returns the entry.
func create(t *testing.T, db *DB, f feature.Feature) rollout.Version {
	t.Helper()
	v := versionOf(feature.Feature{}, f)
	if err := db.CreateFeature(context.Background(), f, v); err != nil {
		t.Fatalf("CreateFeature(%q) = %v", f.Key, err)
	}
	return v
}

// history creates f and updates it n-1 times, and returns its versions
// oldest first.
func history(t *testing.T, db *DB, f feature.Feature, n int) []rollout.Version {
	t.Helper()
	vs := []rollout.Version{create(t, db, f)}
	for i := 1; i < n; i++ {
		g := next(f, f.UpdatedAt.Add(time.Duration(i)*time.Hour))
		v := versionOf(f, g)
		if err := db.UpdateFeature(context.Background(), g, v); err != nil {
			t.Fatalf("UpdateFeature(%q to version %d) = %v", g.Key, g.Version, err)
		}
		vs = append(vs, v)
		f = g
	}
	return vs
}

func wantCode(t *testing.T, call string, err error, code string) {
	t.Helper()
	if got := feature.ErrorCode(err); err == nil || got != code {
		t.Fatalf("%s = %v (code %q), want code %q", call, err, got, code)
	}
}

func features(t *testing.T, db *DB) []feature.Feature {
	t.Helper()
	fs, err := db.Features(context.Background())
	if err != nil {
		t.Fatalf("Features() = %v", err)
	}
	return fs
}

func count(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	east := time.FixedZone("UTC+9", 9*60*60)
	tests := []struct {
		name string
		f    feature.Feature
	}{
		{"every field", newFeature("checkout")},
		{"local times", func() feature.Feature {
			f := newFeature("local")
			f.CreatedAt = t0.In(east)
			f.UpdatedAt = t0.Add(time.Nanosecond).In(east)
			return f
		}()},
		{"empty overrides and values", func() feature.Feature {
			f := newFeature("bare")
			f.Enabled, f.Fallback, f.Salt, f.Description = false, "", "", ""
			f.Overrides = map[string]string{}
			f.Buckets = []feature.Bucket{{Name: "only", Replicas: 1}}
			return f
		}()},
		{"nil overrides, zero times", func() feature.Feature {
			f := newFeature("zero")
			f.Overrides = nil
			f.CreatedAt, f.UpdatedAt = time.Time{}, time.Time{}
			return f
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := newDB(t)
			v := create(t, db, tt.f)

			want := tt.f.Clone()
			if tt.f.Overrides == nil {
				want.Overrides = nil
			}
			want.CreatedAt, want.UpdatedAt = want.CreatedAt.UTC(), want.UpdatedAt.UTC()
			got := features(t, db)
			if diff := cmp.Diff([]feature.Feature{want}, got); diff != "" {
				t.Errorf("Features() mismatch (-want +got):\n%s", diff)
			}
			if loc := got[0].UpdatedAt.Location(); loc != time.UTC {
				t.Errorf("Features()[0].UpdatedAt.Location() = %v, want UTC", loc)
			}
			if !got[0].UpdatedAt.Equal(tt.f.UpdatedAt) || got[0].UpdatedAt.Nanosecond() != tt.f.UpdatedAt.Nanosecond() {
				t.Errorf("Features()[0].UpdatedAt = %v, want %v", got[0].UpdatedAt, tt.f.UpdatedAt)
			}

			wantV := v
			wantV.Config = want
			wantV.Time = v.Time.UTC()
			gotV, err := db.Version(ctx, tt.f.Key, 1)
			if err != nil {
				t.Fatalf("Version(%q, 1) = %v", tt.f.Key, err)
			}
			if diff := cmp.Diff(wantV, gotV); diff != "" {
				t.Errorf("Version(%q, 1) mismatch (-want +got):\n%s", tt.f.Key, diff)
			}
			vs, err := db.Versions(ctx, tt.f.Key, 0, 0)
			if err != nil {
				t.Fatalf("Versions(%q) = %v", tt.f.Key, err)
			}
			if diff := cmp.Diff([]rollout.Version{wantV}, vs); diff != "" {
				t.Errorf("Versions(%q) mismatch (-want +got):\n%s", tt.f.Key, diff)
			}
		})
	}
}

func TestCreateConflict(t *testing.T) {
	tests := []struct {
		name   string
		modify func(f *feature.Feature)
	}{
		{"same key", func(f *feature.Feature) { f.ID = "another-id" }},
		{"same key, no ID", func(f *feature.Feature) { f.ID = "" }},
		{"same ID", func(f *feature.Feature) { f.Key = "other" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := newDB(t)
			f := newFeature("dup")
			create(t, db, f)
			g := newFeature("dup")
			g.Description = "second"
			tt.modify(&g)
			err := db.CreateFeature(context.Background(), g, versionOf(feature.Feature{}, g))
			wantCode(t, "CreateFeature(duplicate)", err, feature.EConflict)
			if diff := cmp.Diff([]feature.Feature{f}, features(t, db)); diff != "" {
				t.Errorf("Features() after refused create mismatch (-want +got):\n%s", diff)
			}
			if n := count(t, db.read, "SELECT count(*) FROM versions"); n != 1 {
				t.Errorf("versions rows = %d, want 1", n)
			}
		})
	}
	t.Run("message", func(t *testing.T) {
		db, _ := newDB(t)
		f := newFeature("dup")
		create(t, db, f)
		err := db.CreateFeature(context.Background(), f, versionOf(feature.Feature{}, f))
		var e *feature.Error
		if !errors.As(err, &e) || e.Message != `feature "dup" already exists` {
			t.Errorf("CreateFeature(duplicate) = %v, want message %q", err, `feature "dup" already exists`)
		}
	})
}

func TestUpdateFeature(t *testing.T) {
	ctx := context.Background()
	f := newFeature("upd")
	g := next(f, t0.Add(time.Hour))
	tests := []struct {
		name    string
		update  feature.Feature
		code    string // "" for success
		message string
	}{
		{name: "next version", update: g},
		{name: "no ID", update: func() feature.Feature { h := g.Clone(); h.ID = ""; return h }()},
		{name: "stale version", update: func() feature.Feature { h := next(g, t0); h.Version = 2; return h }(),
			code: feature.EConflict},
		{name: "version ahead", update: func() feature.Feature { h := next(next(g, t0), t0); return h }(),
			code: feature.EConflict, message: `feature "upd" is at version 1, not 3: reload it and try again`},
		{name: "unknown", update: func() feature.Feature { h := g.Clone(); h.Key = "nope"; return h }(),
			code: feature.ENotFound, message: `feature "nope" does not exist`},
		{name: "other incarnation", update: func() feature.Feature { h := g.Clone(); h.ID = "old-id"; return h }(),
			code: feature.EConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := newDB(t)
			v1 := create(t, db, f)
			if tt.name == "stale version" {
				// Move the feature to version 2 first: an update to 2 is stale.
				if err := db.UpdateFeature(ctx, g, versionOf(f, g)); err != nil {
					t.Fatalf("UpdateFeature(to 2) = %v", err)
				}
			}
			before := features(t, db)
			beforeVersions, err := db.Versions(ctx, f.Key, 0, 0)
			if err != nil {
				t.Fatalf("Versions() = %v", err)
			}
			v := versionOf(f, tt.update)
			err = db.UpdateFeature(ctx, tt.update, v)
			if tt.code != "" {
				wantCode(t, "UpdateFeature()", err, tt.code)
				if e, _ := errors.AsType[*feature.Error](err); tt.message != "" && e.Message != tt.message {
					t.Errorf("UpdateFeature() message = %q, want %q", e.Message, tt.message)
				}
				if diff := cmp.Diff(before, features(t, db)); diff != "" {
					t.Errorf("Features() after refused update changed (-before +after):\n%s", diff)
				}
				afterVersions, err := db.Versions(ctx, f.Key, 0, 0)
				if err != nil {
					t.Fatalf("Versions() = %v", err)
				}
				if diff := cmp.Diff(beforeVersions, afterVersions); diff != "" {
					t.Errorf("Versions() after refused update changed (-before +after):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("UpdateFeature() = %v", err)
			}
			if diff := cmp.Diff([]feature.Feature{g}, features(t, db)); diff != "" {
				t.Errorf("Features() after update mismatch (-want +got):\n%s", diff)
			}
			v.Config.ID = f.ID
			vs, err := db.Versions(ctx, f.Key, 0, 0)
			if err != nil {
				t.Fatalf("Versions() = %v", err)
			}
			if diff := cmp.Diff([]rollout.Version{v, v1}, vs); diff != "" {
				t.Errorf("Versions() after update mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// archiveAndPurge archives the feature key at version, then purges it.
func archiveAndPurge(ctx context.Context, db *store.DB, key string, version int) error {
	if err := db.ArchiveFeature(ctx, key, version, audit.Event{Actor: "test"}, nil, nil); err != nil {
		return err
	}
	return db.PurgeFeature(ctx, key, audit.Event{Actor: "test"}, nil)
}

func TestDeleteFeature(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		key     string
		version int
		code    string
		message string
	}{
		{name: "current version", key: "del", version: 3},
		{name: "stale version", key: "del", version: 2, code: feature.EConflict,
			message: `feature "del" is at version 3, not 2: reload it and try again`},
		{name: "unknown", key: "nope", version: 1, code: feature.ENotFound, message: `feature "nope" does not exist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := newDB(t)
			f := newFeature("del")
			history(t, db, f, 3)
			keep := newFeature("keep")
			keep.ID = "keep-id"
			history(t, db, keep, 2)

			err := archiveAndPurge(ctx, db.DB, tt.key, tt.version)
			wantFeatures, wantVersions := 2, 5
			if tt.code != "" {
				wantCode(t, "DeleteFeature()", err, tt.code)
				if e, _ := errors.AsType[*feature.Error](err); e.Message != tt.message {
					t.Errorf("DeleteFeature() message = %q, want %q", e.Message, tt.message)
				}
			} else {
				if err != nil {
					t.Fatalf("DeleteFeature() = %v", err)
				}
				wantFeatures, wantVersions = 1, 2
				_, err := db.Versions(ctx, "del", 0, 0)
				wantCode(t, "Versions(deleted)", err, feature.ENotFound)
				if n := count(t, db.read, "SELECT count(*) FROM versions WHERE feature_id = ?", f.ID); n != 0 {
					t.Errorf("versions rows of deleted feature = %d, want 0", n)
				}
				if n := count(t, db.read, "SELECT count(*) FROM churn_reports WHERE feature_id = ?", f.ID); n != 0 {
					t.Errorf("churn_reports rows of deleted feature = %d, want 0", n)
				}
				// 3 versions, the archive and the purge.
				if n := count(t, db.read, "SELECT count(*) FROM audit_events WHERE feature_id = ?", f.ID); n != 5 {
					t.Errorf("audit_events of the purged feature = %d, want 5: they are kept", n)
				}
			}
			if n := count(t, db.read, "SELECT count(*) FROM features"); n != wantFeatures {
				t.Errorf("features rows = %d, want %d", n, wantFeatures)
			}
			if n := count(t, db.read, "SELECT count(*) FROM versions"); n != wantVersions {
				t.Errorf("versions rows = %d, want %d", n, wantVersions)
			}
			if n := count(t, db.read, "SELECT count(*) FROM churn_reports"); n != wantVersions {
				t.Errorf("churn_reports rows = %d, want %d", n, wantVersions)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	ctx := context.Background()
	db, _ := newDB(t)
	all := history(t, db, newFeature("one"), 3)
	for i := range all {
		all[i].Config.ID = newFeature("one").ID
	}
	tests := []struct {
		key     string
		version int
		want    rollout.Version
		message string
	}{
		{key: "one", version: 1, want: all[0]},
		{key: "one", version: 3, want: all[2]},
		{key: "one", version: 4, message: `feature "one" has no version 4`},
		{key: "one", version: 0, message: `feature "one" has no version 0`},
		{key: "two", version: 1, message: `feature "two" does not exist`},
	}
	for _, tt := range tests {
		got, err := db.Version(ctx, tt.key, tt.version)
		if tt.message != "" {
			wantCode(t, fmt.Sprintf("Version(%q, %d)", tt.key, tt.version), err, feature.ENotFound)
			if e, _ := errors.AsType[*feature.Error](err); e.Message != tt.message {
				t.Errorf("Version(%q, %d) message = %q, want %q", tt.key, tt.version, e.Message, tt.message)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Version(%q, %d) = %v", tt.key, tt.version, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Version(%q, %d) mismatch (-want +got):\n%s", tt.key, tt.version, diff)
		}
	}
	// The report survives with its moves, shares and override changes.
	got, _ := db.Version(ctx, "one", 1)
	if len(got.Report.Moves) != 1 || got.Report.Moves[0].To != "B" || len(got.Report.OverrideChanges) != 2 || *got.Report.OverrideChanges[0].To != "B" {
		t.Errorf("Version(one, 1).Report = %+v, want its move and 2 override changes", got.Report)
	}
}

// rawDB opens the database file without the store's settings, for
// manipulations the store would refuse.
func rawDB(t *testing.T, path string, foreignKeys bool) *sql.DB {
	t.Helper()
	q := url.Values{"_txlock": {"immediate"}, "_foreign_keys": {strconv.FormatBool(foreignKeys)}}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	raw, err := sql.Open("sqlite3", u.String())
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	t.Cleanup(func() { raw.Close() })
	return raw
}

func TestAtomicity(t *testing.T) {
	ctx := context.Background()
	t.Run("update whose version row fails", func(t *testing.T) {
		db, _ := newDB(t)
		f := newFeature("atom")
		create(t, db, f)
		g := next(f, t0.Add(time.Hour))
		// A version 2 already in the history makes the versions insert fail
		// after the features row was updated.
		if _, err := db.write.Exec(`INSERT INTO versions (feature_id, version, actor, created_at, summary, config)
			VALUES (?, 2, 'intruder', '', '', '{}')`, f.ID); err != nil {
			t.Fatal(err)
		}
		err := db.UpdateFeature(ctx, g, versionOf(f, g))
		if extended(err) != sqlite3.ErrConstraintPrimaryKey {
			t.Fatalf("UpdateFeature() with version 2 in history = %v, want a primary key violation", err)
		}
		if diff := cmp.Diff([]feature.Feature{f}, features(t, db)); diff != "" {
			t.Errorf("Features() after failed update changed (-want +got):\n%s", diff)
		}
		if n := count(t, db.read, "SELECT count(*) FROM churn_reports WHERE version = 2"); n != 0 {
			t.Errorf("churn_reports rows of version 2 = %d, want 0", n)
		}
	})
	t.Run("create whose report row fails", func(t *testing.T) {
		db, path := newDB(t)
		f := newFeature("atom")
		// An orphan report row for (id, 1), slipped in without foreign
		// keys, makes the churn_reports insert fail last.
		raw := rawDB(t, path, false)
		if _, err := raw.Exec(`INSERT INTO churn_reports (feature_id, version, churn, modulo_churn, report)
			VALUES (?, 1, 0, 0, '{}')`, f.ID); err != nil {
			t.Fatal(err)
		}
		err := db.CreateFeature(ctx, f, versionOf(feature.Feature{}, f))
		if extended(err) != sqlite3.ErrConstraintPrimaryKey {
			t.Fatalf("CreateFeature() with a report in the way = %v, want a primary key violation", err)
		}
		if got := features(t, db); len(got) != 0 {
			t.Errorf("Features() after failed create = %v, want none", got)
		}
		if n := count(t, db.read, "SELECT count(*) FROM versions"); n != 0 {
			t.Errorf("versions rows after failed create = %d, want 0", n)
		}
	})
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rollout.db")
	db, err := openDB(ctx, path)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	want := history(t, db, newFeature("keep"), 3)
	for i := range want {
		want[i].Config.ID = newFeature("keep").ID
	}
	wantFeatures := features(t, db)
	if err := db.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}

	for i := range 2 {
		db := openTest(t, path)
		if diff := cmp.Diff(wantFeatures, features(t, db)); diff != "" {
			t.Errorf("reopen %d: Features() mismatch (-want +got):\n%s", i, diff)
		}
		got, err := db.Versions(ctx, "keep", 0, 0)
		if err != nil {
			t.Fatalf("reopen %d: Versions() = %v", i, err)
		}
		if diff := cmp.Diff([]rollout.Version{want[2], want[1], want[0]}, got); diff != "" {
			t.Errorf("reopen %d: Versions() mismatch (-want +got):\n%s", i, diff)
		}
		// Migrations ran once: goose's version table holds its initial row
		// and one row per migration.
		var versions []int
		rows, err := db.read.Query("SELECT version_id FROM goose_db_version ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			versions = append(versions, v)
		}
		rows.Close()
		if diff := cmp.Diff(migrationVersions(t), versions); diff != "" {
			t.Errorf("reopen %d: goose_db_version mismatch (-want +got):\n%s", i, diff)
		}
		db.Close()
	}
}

func TestConnectionSettings(t *testing.T) {
	ctx := context.Background()
	db, _ := newDB(t)
	type settings struct {
		JournalMode                                 string
		ForeignKeys, BusyTimeout, Synchronous, Only int
	}
	read := func(c *sql.Conn) settings {
		t.Helper()
		var s settings
		for _, p := range []struct {
			pragma string
			dst    any
		}{
			{"journal_mode", &s.JournalMode},
			{"foreign_keys", &s.ForeignKeys},
			{"busy_timeout", &s.BusyTimeout},
			{"synchronous", &s.Synchronous},
			{"query_only", &s.Only},
		} {
			if err := c.QueryRowContext(ctx, "PRAGMA "+p.pragma).Scan(p.dst); err != nil {
				t.Fatalf("PRAGMA %s: %v", p.pragma, err)
			}
		}
		return s
	}
	// Hold several read connections at once so the pool must open new ones.
	var conns []*sql.Conn
	for range 4 {
		c, err := db.read.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for i, c := range conns {
		want := settings{JournalMode: "wal", ForeignKeys: 1, BusyTimeout: 5000, Synchronous: 2, Only: 1}
		if diff := cmp.Diff(want, read(c)); diff != "" {
			t.Errorf("read connection %d settings mismatch (-want +got):\n%s", i, diff)
		}
	}
	if n := db.read.Stats().OpenConnections; n < 4 {
		t.Errorf("read pool has %d open connections, want at least 4", n)
	}
	w, err := db.write.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	want := settings{JournalMode: "wal", ForeignKeys: 1, BusyTimeout: 5000, Synchronous: 2, Only: 0}
	if diff := cmp.Diff(want, read(w)); diff != "" {
		t.Errorf("write connection settings mismatch (-want +got):\n%s", diff)
	}
	// Read connections refuse to write.
	if _, err := conns[0].ExecContext(ctx, "DELETE FROM features"); err == nil {
		t.Error("DELETE on a read connection = nil, want error")
	}
}

func TestBackup(t *testing.T) {
	ctx := context.Background()
	db, _ := newDB(t)
	history(t, db, newFeature("saved"), 3)
	create(t, db, newFeature("other"))
	wantFeatures := features(t, db)
	wantVersions, err := db.Versions(ctx, "saved", 0, 0)
	if err != nil {
		t.Fatal(err)
	}

	target := filepath.Join(t.TempDir(), "back up?.db")
	if err := db.Backup(ctx, target); err != nil {
		t.Fatalf("Backup(%q) = %v", target, err)
	}
	// The source stays usable.
	create(t, db, newFeature("later"))

	restored := openTest(t, target)
	if diff := cmp.Diff(wantFeatures, features(t, restored)); diff != "" {
		t.Errorf("backup Features() mismatch (-want +got):\n%s", diff)
	}
	gotVersions, err := restored.Versions(ctx, "saved", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantVersions, gotVersions); diff != "" {
		t.Errorf("backup Versions() mismatch (-want +got):\n%s", diff)
	}

	err = db.Backup(ctx, target)
	wantCode(t, "Backup(existing file)", err, feature.EConflict)
}

func TestAwkwardPath(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "my dir?x=1&y=%20#frag")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "roll out?.db")
	db, err := openDB(ctx, path)
	if err != nil {
		t.Fatalf("Open(%q) = %v", path, err)
	}
	create(t, db, newFeature("spaced"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "roll out?.db" {
			t.Errorf("unexpected file %q beside the database", e.Name())
		}
	}
	db = openTest(t, path)
	if got := features(t, db); len(got) != 1 || got[0].Key != "spaced" {
		t.Errorf("Features() after reopen = %v, want feature spaced", got)
	}
}

func TestConcurrentUpdates(t *testing.T) {
	ctx := context.Background()
	db, path := newDB(t)
	// A second handle on the same file stands for another process: its
	// writers meet this one's through SQLite's lock and the busy timeout.
	other := openTest(t, path)
	f := newFeature("race")
	create(t, db, f)

	const n = 32
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			g := next(f, t0.Add(time.Duration(i)*time.Second))
			g.Description = fmt.Sprintf("writer %d", i)
			h := db
			if i%2 == 1 {
				h = other
			}
			errs[i] = h.UpdateFeature(ctx, g, versionOf(f, g))
		})
	}
	wg.Wait()

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("writers %d and %d both won", winner, i)
		case err == nil:
			winner = i
		case feature.ErrorCode(err) != feature.EConflict:
			t.Errorf("writer %d: UpdateFeature() = %v, want nil or %s", i, err, feature.EConflict)
		}
	}
	if winner < 0 {
		t.Fatal("no writer won")
	}
	got := features(t, db)
	if want := fmt.Sprintf("writer %d", winner); len(got) != 1 || got[0].Description != want || got[0].Version != 2 {
		t.Errorf("Features() = %+v, want version 2 by %q", got, want)
	}
	if n := count(t, db.read, "SELECT count(*) FROM versions"); n != 2 {
		t.Errorf("versions rows = %d, want 2", n)
	}
}

func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rollout.db")
	db, _, err := open(ctx, path, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	// Another process holds the write lock.
	raw := rawDB(t, path, true)
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()

	f := newFeature("busy")
	err = db.CreateFeature(ctx, f, versionOf(feature.Feature{}, f))
	wantCode(t, "CreateFeature(locked database)", err, feature.EUnavailable)
	if se, ok := errors.AsType[sqlite3.Error](err); !ok || se.Code != sqlite3.ErrBusy {
		t.Errorf("CreateFeature(locked database) = %v, want it to wrap SQLITE_BUSY", err)
	}
	// Reads go on under WAL.
	if _, err := db.Features(ctx); err != nil {
		t.Errorf("Features() while another writer holds the lock = %v", err)
	}
	if err := db.Ping(ctx); err != nil {
		t.Errorf("Ping() = %v", err)
	}
}

func TestWrapErr(t *testing.T) {
	domain := feature.Errorf(feature.ENotFound, "feature %q does not exist", "x")
	tests := []struct {
		err  error
		code string
	}{
		{sqlite3.Error{Code: sqlite3.ErrBusy}, feature.EUnavailable},
		{sqlite3.Error{Code: sqlite3.ErrLocked}, feature.EUnavailable},
		{sqlite3.Error{Code: sqlite3.ErrReadonly}, feature.EUnavailable},
		{sqlite3.Error{Code: sqlite3.ErrFull}, feature.EUnavailable},
		{sqlite3.Error{Code: sqlite3.ErrIoErr}, feature.EUnavailable},
		{sqlite3.Error{Code: sqlite3.ErrCantOpen}, feature.EUnavailable},
		{fmt.Errorf("insert: %w", sqlite3.Error{Code: sqlite3.ErrFull}), feature.EUnavailable},
		{sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintCheck}, feature.EInternal},
		{errors.New("boom"), feature.EInternal},
		{domain, feature.ENotFound},
	}
	for _, tt := range tests {
		got := wrapErr(tt.err, "update feature %q", "x")
		if code := feature.ErrorCode(got); code != tt.code {
			t.Errorf("ErrorCode(wrapErr(%v)) = %q, want %q", tt.err, code, tt.code)
		}
		if !errors.Is(got, tt.err) {
			t.Errorf("wrapErr(%v) = %v, want it to wrap the cause", tt.err, got)
		}
	}
}

func TestOpenRefusesMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "rollout.db")
	if db, err := Open(context.Background(), path); err == nil {
		db.Close()
		t.Fatalf("Open(%q) = nil error, want error", path)
	}
}

// migrationVersions is what goose's version table holds after the migrations
// ran once: its initial row 0, then one row per migration file.
func migrationVersions(t *testing.T) []int {
	t.Helper()
	files, err := fs.Glob(migrations.SQLite, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	out := []int{0}
	for _, f := range files {
		n, err := strconv.Atoi(strings.SplitN(f, "_", 2)[0])
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		out = append(out, n)
	}
	return out
}

func TestExposures(t *testing.T) {
	db, _ := newDB(t)
	ctx := context.Background()
	f := newFeature("f")
	create(t, db, f)
	add := []feature.Exposure{
		{FeatureID: f.ID, Version: 1, Bucket: "A", Count: 5},
		{FeatureID: f.ID, Version: 1, Bucket: "", Count: 2},
		{FeatureID: "gone", Version: 1, Bucket: "A", Count: 7}, // a deleted feature: dropped
	}
	for range 2 {
		if err := db.AddExposures(ctx, add); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.Exposures(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	want := []feature.Exposure{
		{Feature: "f", FeatureID: f.ID, Version: 1, Bucket: "", Count: 4},
		{Feature: "f", FeatureID: f.ID, Version: 1, Bucket: "A", Count: 10},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Exposures mismatch (-want +got):\n%s", diff)
	}
	if err := archiveAndPurge(ctx, db.DB, "f", 1); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db.read, "SELECT count(*) FROM exposures"); n != 0 {
		t.Errorf("%d exposure rows after deleting the feature, want 0", n)
	}
}

// TestFileMovedAway: once the database file is moved away, writes and Ping
// fail as unavailable instead of going to a file nobody will open again;
// reads of what is loaded go on, and all is well once the file is back.
func TestFileMovedAway(t *testing.T) {
	db, path := newDB(t)
	ctx := context.Background()
	f := newFeature("f")
	create(t, db, f)
	if err := os.Rename(path, path+".away"); err != nil {
		t.Fatal(err)
	}
	g := next(f, time.Now())
	wantCode(t, "UpdateFeature with the file gone", db.UpdateFeature(ctx, g, versionOf(f, g)), feature.EUnavailable)
	wantCode(t, "Ping with the file gone", db.Ping(ctx), feature.EUnavailable)
	if err := os.Rename(path+".away", path); err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("Ping with the file back: %v", err)
	}
	if err := db.UpdateFeature(ctx, g, versionOf(f, g)); err != nil {
		t.Fatalf("UpdateFeature with the file back: %v", err)
	}
	db.Close()
	db = openTest(t, path)
	if got := features(t, db); len(got) != 1 || got[0].Version != g.Version {
		t.Errorf("after reopening: %+v, want f at version %d", got, g.Version)
	}
}

// TestCheckWrite: with another process holding the write lock, CheckWrite
// answers unavailable, on a connection of its own that waits for the lock
// probeBusy (not the writers' 5 s busy timeout), while reads go on; once
// the lock is released it passes again. How long it took is logged, not
// asserted: the connection's busy timeout is what bounds it.
func TestCheckWrite(t *testing.T) {
	db, path := newDB(t)
	ctx := context.Background()
	if err := db.CheckWrite(ctx); err != nil {
		t.Fatalf("CheckWrite() = %v", err)
	}
	for _, tt := range []struct {
		name string
		pool *sql.DB
		want time.Duration
	}{{"probe", db.probe, probeBusy}, {"write", db.write, busyTimeout}} {
		var ms int64
		if err := tt.pool.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms); err != nil || time.Duration(ms)*time.Millisecond != tt.want {
			t.Errorf("the %s pool's busy_timeout = %d ms, %v; want %v", tt.name, ms, err, tt.want)
		}
	}
	// While the writer's one connection is taken, CheckWrite still writes:
	// it does not wait behind the writers.
	conn, err := db.write.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CheckWrite(ctx); err != nil {
		t.Errorf("CheckWrite() with the writer's connection taken = %v", err)
	}
	conn.Close()
	raw := rawDB(t, path, true)
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`UPDATE write_probe SET checked_at = 'held'`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = db.CheckWrite(ctx)
	took := time.Since(start)
	wantCode(t, "CheckWrite(locked database)", err, feature.EUnavailable)
	if err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("CheckWrite(locked database) = %v, want it to give up waiting for the lock (busy)", err)
	}
	t.Logf("CheckWrite(locked database) gave up after %v (its connection's busy timeout: %v)", took, probeBusy)
	if _, err := db.Revision(ctx); err != nil {
		t.Errorf("Revision() while another writer holds the lock = %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := db.CheckWrite(ctx); err != nil {
		t.Errorf("CheckWrite() after the lock is released = %v", err)
	}

	// A gone file is unavailable too.
	if err := os.Rename(path, path+".away"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "CheckWrite(file gone)", db.CheckWrite(ctx), feature.EUnavailable)
	if err := os.Rename(path+".away", path); err != nil {
		t.Fatal(err)
	}
}

// TestTokenConstraints: a token write refused by a constraint
// rolls back whole, and a unique index violation is a conflict by its
// SQLite code.
func TestTokenConstraints(t *testing.T) {
	db, _ := newDB(t)
	ctx := context.Background()
	tok := auth.Token{ID: "1", Name: "ci", Role: auth.RoleAdmin, Hash: "h", CreatedAt: t0}
	if err := db.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	sameHash := auth.Token{ID: "2", Name: "other", Role: auth.RoleAdmin, Hash: "h", CreatedAt: t0}
	wantCode(t, "CreateToken(same hash)", db.CreateToken(ctx, sameHash), feature.EConflict)
	sameID := auth.Token{ID: "1", Name: "third", Role: auth.RoleAdmin, Hash: "h3", CreatedAt: t0}
	wantCode(t, "CreateToken(same ID)", db.CreateToken(ctx, sameID), feature.EConflict)
	badRole := auth.Token{ID: "4", Name: "bad", Role: "root", Hash: "h4", CreatedAt: t0}
	err := db.CreateToken(ctx, badRole)
	if err == nil || feature.ErrorCode(err) != feature.EInternal || extended(err) != sqlite3.ErrConstraintCheck {
		t.Errorf("CreateToken(role root) = %v, want an internal error wrapping a CHECK violation", err)
	}
	if n := count(t, db.read, "SELECT count(*) FROM tokens"); n != 1 {
		t.Errorf("%d tokens stored, want 1", n)
	}
	if n := count(t, db.read, "SELECT count(*) FROM commits"); n != 1 {
		t.Errorf("%d commits stored, want 1", n)
	}
}

func ptr[T any](v T) *T { return &v }
