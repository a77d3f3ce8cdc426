package postgres

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/store"
)

// TestWrapErrCodes pins the translation of server errors by SQLSTATE and
// of connection errors by type; the real server's errors are exercised in
// TestUnavailable.
func TestWrapErrCodes(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&pgconn.PgError{Code: "08006"}, rollout.EUnavailable}, // connection failure
		{&pgconn.PgError{Code: "08001"}, rollout.EUnavailable},
		{&pgconn.PgError{Code: "57P01"}, rollout.EUnavailable}, // admin shutdown
		{&pgconn.PgError{Code: "57P02"}, rollout.EUnavailable},
		{&pgconn.PgError{Code: "57P03"}, rollout.EUnavailable}, // cannot connect now
		{&pgconn.PgError{Code: "53100"}, rollout.EUnavailable}, // disk full
		{&pgconn.PgError{Code: "53300"}, rollout.EUnavailable}, // too many connections
		{&pgconn.PgError{Code: "25006"}, rollout.EUnavailable}, // read-only transaction
		{&pgconn.PgError{Code: "57014"}, rollout.EUnavailable}, // statement timeout (query canceled)
		{&pgconn.PgError{Code: "55P03"}, rollout.EUnavailable}, // lock timeout
		{fmt.Errorf("x: %w", context.DeadlineExceeded), rollout.EUnavailable},
		{&pgconn.PgError{Code: "23505", Message: "connection failure"}, rollout.EInternal},
		{&pgconn.PgError{Code: "42P01"}, rollout.EInternal},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), rollout.EUnavailable},
		{fmt.Errorf("x: %w", pgconn.ErrConnClosed), rollout.EUnavailable},
		{fmt.Errorf("the server is shutting down"), rollout.EInternal}, // text is never read
		{rollout.Errorf(rollout.ENotFound, "gone"), rollout.ENotFound},
	}
	for _, tt := range tests {
		if got := rollout.ErrorCode(wrapErr(tt.err, "op")); got != tt.want {
			t.Errorf("ErrorCode(wrapErr(%v)) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// wrapErr wraps err as the store does with this package's dialect.
func wrapErr(err error, op string) error {
	d := store.Dialect{Unavailable: unavailable, Constraint: constraint}
	return d.WrapErr(err, "%s", op)
}
