package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresEnv names the environment variable holding the DSN of a
// PostgreSQL server tests may create databases on.
const PostgresEnv = "ROLLOUT_TEST_POSTGRES"

// PostgresDSN creates a new database with a random name on the server
// ROLLOUT_TEST_POSTGRES names, returns its DSN and drops it (with any
// connections still open to it) when t's test ends.
//
// Without the variable it skips t, saying how to run the test, except when
// CI=true, where it fails t: CI must never skip PostgreSQL tests.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	admin := os.Getenv(PostgresEnv)
	if admin == "" {
		const how = PostgresEnv + " is not set: run PostgreSQL tests with " +
			PostgresEnv + "='postgres://root@127.0.0.1:5432/postgres?sslmode=disable' go test ./..."
		if os.Getenv("CI") == "true" {
			t.Fatal(how + " (CI=true: these tests must not be skipped)")
		}
		t.Skip(how)
	}
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("%s=%q is not a postgres:// URL (%v)", PostgresEnv, admin, err)
	}
	b := make([]byte, 8)
	rand.Read(b)
	name := "rollout_test_" + hex.EncodeToString(b)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to %s: %v", PostgresEnv, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
