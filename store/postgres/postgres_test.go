package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/postgres"
	"github.com/rollout/rollout/store/storetest"
)

func open(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opened {
		dsn := storetest.PostgresDSN(t)
		openAnother := func(t *testing.T) storetest.Store { return open(t, dsn) }
		exec := func(t *testing.T, stmt string) error {
			conn, err := pgx.Connect(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			_, err = conn.Exec(context.Background(), stmt)
			return err
		}
		db := open(t, dsn)
		return storetest.Opened{Store: db, Open: openAnother, In: func(env string) storetest.Store { return db.In(env) }, HistoryBytes: func(t *testing.T) int64 { return historyBytes(t, dsn) }, Exec: exec,
			TableBytes: func(t *testing.T, table string) int64 { return tableBytes(t, dsn, table) }}
	})
}

// historyBytes returns the bytes PostgreSQL uses for the tables of
// features' history, their indexes and TOAST included. The features table
// is left out: each change replaces its row, and the old row's space
// waits for VACUUM.
func historyBytes(t *testing.T, dsn string) int64 {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(context.Background(), `
		SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c
		WHERE c.relname IN ('versions', 'churn_reports', 'override_spans', 'commits') AND c.relkind = 'r'`).Scan(&n); err != nil {
		t.Fatalf("history size: %v", err)
	}
	return n
}

// tableBytes returns the bytes PostgreSQL uses for table, its indexes
// and TOAST included.
func tableBytes(t *testing.T, dsn, table string) int64 {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(context.Background(), `SELECT pg_total_relation_size($1::regclass)`, table).Scan(&n); err != nil {
		t.Fatalf("size of %s: %v", table, err)
	}
	return n
}

// TestOpenConcurrently: instances starting at once on a new database
// migrate it once, under goose's lock, and all open.
func TestOpenConcurrently(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			db, err := postgres.Open(context.Background(), dsn)
			if err == nil {
				_, err = db.Revision(context.Background())
				db.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open() %d of %d at once = %v", i, n, err)
		}
	}
}

func testFeature(key string) (feature.Feature, rollout.Version) {
	f := feature.Feature{
		ID: "id-" + key, Key: key, Enabled: true, Salt: "s",
		Buckets:   []feature.Bucket{{Name: "on", Replicas: 1}},
		Version:   1,
		CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC(),
	}
	return f, rollout.Version{Version: 1, Actor: "test", Time: f.UpdatedAt, Config: f}
}

func receive(t *testing.T, ch <-chan int64, what string) int64 {
	t.Helper()
	select {
	case rev, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
		return rev
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing received in 10s", what)
	}
	return 0
}

// TestNotifications: a change through one handle is announced to another
// handle's listener with its revision; a slow reader gets the latest
// revision, not a backlog; after the listening connection is killed, the
// listener reconnects and sends the current revision; cancelling closes
// the channel.
func TestNotifications(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	writer, reader := open(t, dsn), open(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := reader.Notifications(ctx)
	if rev := receive(t, ch, "first value"); rev != 0 {
		t.Fatalf("first value = %d, want the current revision 0", rev)
	}

	f, v := testFeature("a")
	if err := writer.CreateFeature(ctx, f, v); err != nil {
		t.Fatal(err)
	}
	if rev := receive(t, ch, "after a create"); rev != 1 {
		t.Errorf("after a create: %d, want revision 1", rev)
	}

	// A slow reader: five changes coalesce into at most one pending value,
	// the highest.
	for i := range 5 {
		g, v := testFeature(fmt.Sprintf("b%d", i))
		if err := writer.CreateFeature(ctx, g, v); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	var last int64
	for last != 6 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		last = receive(t, ch, "after five creates")
	}
	if last != 6 {
		t.Fatalf("after five creates: last value %d, want 6", last)
	}
	select {
	case rev := <-ch:
		t.Errorf("a value %d left after the latest was received, want none", rev)
	case <-time.After(200 * time.Millisecond):
	}

	// The listening connection dies; the listener comes back and says the
	// current revision, which it could not be told of meanwhile.
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var killed int
	if err := admin.QueryRow(ctx, `
		SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1`, postgres.ListenerName).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminate the listener: %d terminated, %v; want 1", killed, err)
	}
	// The channel was empty: this value comes from the new connection.
	if rev := receive(t, ch, "after reconnecting"); rev != 6 {
		t.Errorf("after reconnecting: %d, want the current revision 6", rev)
	}
	g, v := testFeature("c")
	if err := writer.CreateFeature(ctx, g, v); err != nil {
		t.Fatal(err)
	}
	if rev := receive(t, ch, "after a create on the new connection"); rev != 7 {
		t.Errorf("after a create on the new connection: %d, want 7", rev)
	}
	if err := writer.ArchiveFeature(ctx, "c", 1, audit.Event{Actor: "test"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if rev := receive(t, ch, "after a delete"); rev != 8 {
		t.Errorf("after a delete: %d, want 8", rev)
	}

	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			for range ch {
			}
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed 5s after ctx was cancelled")
	}
}

// TestUnavailable: a server that cannot be reached, or that ends the
// session, is feature.EUnavailable, found by error type and SQLSTATE.
func TestUnavailable(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	ctx := context.Background()

	// Nothing listens on this port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = postgres.Open(ctx, "postgres://root@"+addr+"/x?sslmode=disable&connect_timeout=2")
	if code := feature.ErrorCode(err); code != feature.EUnavailable {
		t.Errorf("Open(no server) = %v (code %q), want %q", err, code, feature.EUnavailable)
	}

	// The server terminates every session of the store: the next calls
	// fail as unavailable, or succeed on a new connection, never as
	// internal errors.
	db := open(t, dsn)
	if err := db.CheckWrite(ctx); err != nil {
		t.Fatalf("CheckWrite() = %v", err)
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	f, v := testFeature("x")
	err = db.CreateFeature(ctx, f, v)
	if err != nil {
		if code := feature.ErrorCode(err); code != feature.EUnavailable {
			t.Errorf("CreateFeature(session terminated) = %v (code %q), want nil or %q", err, code, feature.EUnavailable)
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code != "57P01" {
			t.Errorf("CreateFeature(session terminated) = SQLSTATE %s, want 57P01", pe.Code)
		}
	}
	// The pool makes new connections: all is well again.
	if err := db.CheckWrite(ctx); err != nil {
		t.Errorf("CheckWrite() after the sessions ended = %v", err)
	}

	// A write that waits behind a lock longer than a second: CheckWrite
	// gives up as unavailable within about a second.
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE write_probe SET checked_at = now()`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = db.CheckWrite(ctx)
	if code := feature.ErrorCode(err); code != feature.EUnavailable {
		t.Errorf("CheckWrite(row locked) = %v (code %q), want %q", err, code, feature.EUnavailable)
	}
	t.Logf("CheckWrite(row locked) gave up after %v (its lock timeout is about 1s)", time.Since(start))
}

// TestLockTimeout: every connection of the store gives up waiting for a
// lock after the lock_timeout Open sets (store.DefaultTimeout), as
// unavailable, even with no timeout of its own; without the setting the
// write would wait for the lock as long as it is held.
func TestLockTimeout(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	db := open(t, dsn)
	db.SetTimeout(0)
	ctx := context.Background()
	f, v := testFeature("a")
	if err := db.CreateFeature(ctx, f, v); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM features WHERE key = 'a' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	err = within(t, time.Minute, "DeleteFeature of a locked row", func() error { return db.ArchiveFeature(ctx, "a", 1, audit.Event{Actor: "test"}, nil, nil) })
	if code := feature.ErrorCode(err); code != feature.EUnavailable {
		t.Errorf("DeleteFeature(row locked) = %v (code %q), want %q", err, code, feature.EUnavailable)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55P03" {
		t.Errorf("DeleteFeature(row locked) = %v, want SQLSTATE 55P03 (lock_timeout)", err)
	}
}
