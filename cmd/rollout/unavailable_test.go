package main

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDatabaseGoneWhileRunning: with the database file moved away,
// evaluation goes on from memory, changes fail with a clear 503 and change
// nothing, /readyz says why, and once the file is back everything works and
// nothing was lost.
func TestDatabaseGoneWhileRunning(t *testing.T) {
	s := startServer(t, "")
	s.must(201, "POST", "/api/features", abcFeature("f"))
	s.must(200, "POST", "/api/features/f/buckets", map[string]any{"name": "D", "replicas": 3})
	want := s.evaluate("f", "user1")["bucket"]

	if err := os.Rename(s.dbPath, s.dbPath+".away"); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if got := s.evaluate("f", "user1"); got["bucket"] != want || got["version"] != 2.0 {
			t.Fatalf("evaluate with the database gone = %v, want %v at version 2", got, want)
		}
	}
	r := s.do("PUT", "/api/features/f/buckets/A", map[string]any{"replicas": 9})
	if r.status != 503 || r.errorCode() != "unavailable" {
		t.Errorf("a change with the database gone = %d %s, want 503 unavailable", r.status, r.body)
	}
	if r := s.do("GET", "/readyz", nil); r.status != 503 {
		t.Errorf("/readyz with the database gone = %d %s, want 503", r.status, r.body)
	}
	s.must(200, "GET", "/healthz", nil)
	if f := s.must(200, "GET", "/api/features/f", nil); f["version"] != 2.0 {
		t.Errorf("the refused change moved the feature to version %v", f["version"])
	}

	if err := os.Rename(s.dbPath+".away", s.dbPath); err != nil {
		t.Fatal(err)
	}
	s.must(200, "GET", "/readyz", nil)
	s.must(200, "PUT", "/api/features/f/buckets/A", map[string]any{"replicas": 9})
	s.restart()
	vs := s.must(200, "GET", "/api/features/f/versions", nil)["versions"].([]any)
	if len(vs) != 3 {
		t.Fatalf("%d versions after the database came back and a restart, want 3", len(vs))
	}
}

// TestDiskFull runs the server on a tiny file system, fills it, and checks
// that changes fail with 503 while evaluation goes on, and that all is well
// once space is freed. It needs to mount a tmpfs (root, as in CI).
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		// Mounting needs root and a sandbox that allows it; the store's
		// mapping of SQLITE_FULL is tested without it (store.TestWrapErr).
		t.Skipf("cannot mount a tmpfs here (%v %s): run as root to test a full disk", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })

	s := startServer(t, filepath.Join(dir, "rollout.db"))
	s.must(201, "POST", "/api/features", abcFeature("f"))
	want := s.evaluate("f", "user1")["bucket"]

	// Fill the file system.
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := filler.Write(chunk); err != nil {
			break
		}
	}
	filler.Close()

	sawFull := false
	for i := range 50 {
		r := s.do("PUT", "/api/features/f/overrides/"+fmt.Sprint("user-", i, "-", strings.Repeat("x", 200)), map[string]any{"bucket": "A"})
		if r.status == 503 {
			sawFull = true
			if r.errorCode() != "unavailable" {
				t.Errorf("a change on a full disk = %d %s, want 503 unavailable", r.status, r.body)
			}
			break
		}
		if r.status != 200 {
			t.Fatalf("a change on a filling disk = %d %s, want 200 or 503", r.status, r.body)
		}
	}
	if !sawFull {
		t.Fatal("the disk never filled up")
	}
	if got := s.evaluate("f", "user1"); got["bucket"] != want {
		t.Errorf("evaluate on a full disk = %v, want %v", got, want)
	}
	acknowledged := s.must(200, "GET", "/api/features/f", nil)["version"]

	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	s.must(200, "PUT", "/api/features/f/overrides/after", map[string]any{"bucket": "B"})
	s.restart()
	if v := s.must(200, "GET", "/api/features/f", nil)["version"]; v != acknowledged.(float64)+1 {
		t.Errorf("after freeing space and a restart the feature is at version %v, want %v", v, acknowledged.(float64)+1)
	}
}

// TestReadyWhileWritesFail: /readyz says not ready while another process
// holds SQLite's write lock (every change would fail), and ready again once
// it lets go.
func TestReadyWhileWritesFail(t *testing.T) {
	s := startServer(t, "")
	s.must(201, "POST", "/api/features", abcFeature("f"))
	s.must(200, "GET", "/readyz", nil)
	other, err := sql.Open("sqlite3", "file:"+s.dbPath+"?_txlock=immediate&_busy_timeout=100")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin() // BEGIN IMMEDIATE: the write lock, held
	if err != nil {
		t.Fatal(err)
	}
	r := s.do("GET", "/readyz", nil)
	if r.status != 503 || !strings.Contains(string(r.body), "database") {
		t.Errorf("/readyz while another process holds the write lock = %d %s, want 503 naming the database", r.status, r.body)
	}
	if r := s.do("PATCH", "/api/features/f", map[string]any{"description": "x"}); r.status != 503 {
		t.Errorf("a change while the lock was held = %d %s, want 503", r.status, r.body)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	s.must(200, "GET", "/readyz", nil)
}
