package postgres

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rollout/rollout/rollout/feature"
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
		{&pgconn.PgError{Code: "08006"}, feature.EUnavailable}, // connection failure
		{&pgconn.PgError{Code: "08001"}, feature.EUnavailable},
		{&pgconn.PgError{Code: "57P01"}, feature.EUnavailable}, // admin shutdown
		{&pgconn.PgError{Code: "57P02"}, feature.EUnavailable},
		{&pgconn.PgError{Code: "57P03"}, feature.EUnavailable}, // cannot connect now
		{&pgconn.PgError{Code: "53100"}, feature.EUnavailable}, // disk full
		{&pgconn.PgError{Code: "53300"}, feature.EUnavailable}, // too many connections
		{&pgconn.PgError{Code: "25006"}, feature.EUnavailable}, // read-only transaction
		{&pgconn.PgError{Code: "57014"}, feature.EUnavailable}, // statement timeout (query canceled)
		{&pgconn.PgError{Code: "55P03"}, feature.EUnavailable}, // lock timeout
		{fmt.Errorf("x: %w", context.DeadlineExceeded), feature.EUnavailable},
		{&pgconn.PgError{Code: "23505", Message: "connection failure"}, feature.EInternal},
		{&pgconn.PgError{Code: "42P01"}, feature.EInternal},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), feature.EUnavailable},
		{fmt.Errorf("x: %w", pgconn.ErrConnClosed), feature.EUnavailable},
		{fmt.Errorf("the server is shutting down"), feature.EInternal}, // text is never read
		{feature.Errorf(feature.ENotFound, "gone"), feature.ENotFound},
	}
	for _, tt := range tests {
		if got := feature.ErrorCode(wrapErr(tt.err, "op")); got != tt.want {
			t.Errorf("ErrorCode(wrapErr(%v)) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// wrapErr wraps err as the store does with this package's dialect.
func wrapErr(err error, op string) error {
	d := store.Dialect{Unavailable: unavailable, Constraint: constraint}
	return d.WrapErr(err, "%s", op)
}
