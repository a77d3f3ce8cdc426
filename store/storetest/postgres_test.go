package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// recorder is a testing.TB that records how a helper stopped the test.
type recorder struct {
	testing.TB
	how, msg string
}

type stopped struct{}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.how, r.msg = "skip", fmt.Sprint(args...)
	panic(stopped{})
}
func (r *recorder) Fatal(args ...any) {
	r.how, r.msg = "fatal", fmt.Sprint(args...)
	panic(stopped{})
}

func run(r *recorder) (dsn string) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(stopped); !ok {
				panic(v)
			}
		}
	}()
	return PostgresDSN(r)
}

// TestPostgresDSNWithout: without ROLLOUT_TEST_POSTGRES the test is skipped
// with a message saying how to run it, or fails under CI=true.
func TestPostgresDSNWithout(t *testing.T) {
	t.Setenv(PostgresEnv, "")
	for _, tt := range []struct{ ci, want string }{{"", "skip"}, {"false", "skip"}, {"true", "fatal"}} {
		t.Setenv("CI", tt.ci)
		r := &recorder{TB: t}
		if dsn := run(r); dsn != "" || r.how != tt.want {
			t.Errorf("CI=%q: PostgresDSN() = %q and %s, want %s", tt.ci, dsn, r.how, tt.want)
		}
		if !strings.Contains(r.msg, PostgresEnv+"='postgres://root@127.0.0.1:5432/postgres?sslmode=disable' go test ./...") {
			t.Errorf("CI=%q: message %q does not say how to run the tests", tt.ci, r.msg)
		}
	}
}

// TestPostgresDSN: the database exists during the test and is gone after.
func TestPostgresDSN(t *testing.T) {
	var name string
	t.Run("use", func(t *testing.T) {
		dsn := PostgresDSN(t)
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatalf("connect to the new database: %v", err)
		}
		defer conn.Close(context.Background())
		if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "rollout_test_") {
			t.Errorf("current_database() = %q, want rollout_test_…", name)
		}
		// Left open: the cleanup drops the database all the same.
		leak, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		_ = leak
	})
	admin := PostgresDSN(t) // skips or fails as the variable says
	conn, err := pgx.Connect(context.Background(), admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil || n != 0 {
		t.Errorf("database %s after its test: %d found, %v; want dropped", name, n, err)
	}
}
