package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollout/rollout/cmd/internal/serve"

	"github.com/rollout/rollout/store/sqlite"
)

// runCLI runs the rollout command in-process, as the binary would.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = run(context.Background(), args, &out, &errb, func(string) string { return "" })
	return out.String(), errb.String(), err
}

// TestBackupAndRestore backs up the database of a running server, then
// restores it by starting a server on the copy: everything is there.
func TestBackupAndRestore(t *testing.T) {
	s := startServer(t, "")
	s.must(201, "POST", "/api/features", abcFeature("f"))
	s.must(200, "POST", "/api/features/f/buckets", map[string]any{"name": "D", "replicas": 3})
	before := dump(t, s)

	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, stderr, err := runCLI(t, "backup", "--db", s.dbPath, backup); err != nil {
		t.Fatalf("rollout backup: %v\n%s", err, stderr)
	}
	if _, _, err := runCLI(t, "backup", "--db", s.dbPath, backup); err == nil {
		t.Error("a second backup over the first succeeded, want a refusal")
	}
	// The server goes on taking changes while and after the copy is made.
	s.must(200, "PATCH", "/api/features/f", map[string]any{"description": "after the backup"})

	restored := startServer(t, backup)
	if got := dump(t, restored); got != before {
		t.Errorf("restored database differs:\nbackup of %s\nrestored  %s", before, got)
	}
	if _, err := os.Stat(backup); err != nil {
		t.Fatal(err)
	}
}

// createDatabase creates the database at path, migrated, if it does not
// exist, as serve does at start.
func createDatabase(t *testing.T, path string) {
	t.Helper()
	if serve.IsPostgres(path) {
		return // a test's PostgreSQL database exists already
	}
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestTokenCommands(t *testing.T) {
	db := filepath.Join(t.TempDir(), "rollout.db")
	createDatabase(t, db)
	secret, stderr, err := runCLI(t, "token", "create", "--name", "ci", "--role", "editor", "--db", db)
	if err != nil {
		t.Fatalf("token create: %v\n%s", err, stderr)
	}
	secret = strings.TrimSpace(secret)
	if !strings.HasPrefix(secret, "rlt_") || !strings.Contains(stderr, "shown this once") {
		t.Errorf("token create printed %q / %q, want the secret alone on stdout", secret, stderr)
	}
	list, _, err := runCLI(t, "token", "list", "--db", db)
	if err != nil || !strings.Contains(list, "ci") || !strings.Contains(list, "editor") || strings.Contains(list, secret) {
		t.Errorf("token list = %q, %v: want the token's name and role, never its secret", list, err)
	}
	for _, bad := range [][]string{
		{"token", "create", "--name", "ci", "--role", "editor", "--db", db}, // name taken
		{"token", "create", "--name", "x", "--role", "root", "--db", db},
		{"token", "revoke", "--name", "nobody", "--db", db},
		{"token", "frob", "--db", db},
		{"token"},
		{"backup", "--db", db},
	} {
		if _, _, err := runCLI(t, bad...); err == nil {
			t.Errorf("rollout %v succeeded, want an error", bad)
		}
	}
	if _, _, err := runCLI(t, "token", "revoke", "--name", "ci", "--db", db); err != nil {
		t.Fatal(err)
	}
	list, _, _ = runCLI(t, "token", "list", "--db", db)
	if !strings.Contains(list, "ci") || strings.Count(list, "\n") != 2 || strings.HasSuffix(strings.TrimSpace(list), "-") {
		t.Errorf("token list after revoke = %q, want ci with its revocation time", list)
	}
}
