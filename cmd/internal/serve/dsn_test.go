package serve

import (
	"errors"
	"strings"
	"testing"
)

func TestIsPostgres(t *testing.T) {
	for _, tt := range []struct {
		db   string
		want bool
	}{
		{"rollout.db", false},
		{"/var/lib/rollout/rollout.db", false},
		{"data=1.db", false},
		{"postgres://u:p@h/db", true},
		{"postgresql://h/db", true},
		{"POSTGRES://h/db", true},
		{"host=db.internal user=app password=secret dbname=rollout", true},
		{"  dbname = rollout", true},
		{"password=x", true},
	} {
		if got := IsPostgres(tt.db); got != tt.want {
			t.Errorf("IsPostgres(%q) = %v, want %v", tt.db, got, tt.want)
		}
	}
}

// TestRedactDSN: every password of either PostgreSQL form is hidden, what
// names the database is kept, and a SQLite file name is left as it is.
func TestRedactDSN(t *testing.T) {
	for _, tt := range []struct {
		db, want string
		secrets  []string
	}{
		{"rollout.db", "rollout.db", nil},
		{"postgres://app:s3cret@db:5432/rollout?sslmode=disable", "postgres://app:xxxxx@db:5432/rollout?sslmode=disable", []string{"s3cret"}},
		{"postgres://app@db/rollout?sslmode=disable&password=qs3cret", "postgres://app@db/rollout?sslmode=disable&password=xxxxx", []string{"qs3cret"}},
		{"postgresql://app:a%40b@db/rollout?PassWord=x%20y&sslpassword=keypw", "postgresql://app:xxxxx@db/rollout?PassWord=xxxxx&sslpassword=xxxxx", []string{"a%40b", "a@b", "x%20y", "keypw"}},
		{"postgres://app:s3cret@db:notaport/rollout", "postgres://… (a URL that does not parse, not shown)", []string{"s3cret"}},
		{"host=db user=app password=s3cret dbname=rollout", "host=db user=app password=xxxxx dbname=rollout", []string{"s3cret"}},
		{"host=db password = 'two words\\' pw' dbname=rollout", "host=db password=xxxxx dbname=rollout", []string{"two words", "pw'"}},
		{"host=db password='unterminated", "PostgreSQL key=value settings that do not parse, not shown", []string{"unterminated"}},
	} {
		got := RedactDSN(tt.db)
		if got != tt.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tt.db, got, tt.want)
		}
		for _, s := range tt.secrets {
			if strings.Contains(got, s) {
				t.Errorf("RedactDSN(%q) = %q shows %q", tt.db, got, s)
			}
		}
	}
}

// TestRedactErr: an error that repeats a password of the DSN is reworded
// without it and still wraps its cause; one that does not is left alone.
func TestRedactErr(t *testing.T) {
	cause := errors.New("cannot parse `postgres://app:s3cret@db:x/rollout?password=qs3cret`")
	db := "postgres://app:s3cret@db:x/rollout?password=qs3cret"
	err := redactErr(cause, db)
	if strings.Contains(err.Error(), "s3cret") || !errors.Is(err, cause) {
		t.Errorf("redactErr = %q (wrapping the cause: %v), want no password, wrapping the cause", err, errors.Is(err, cause))
	}
	plain := errors.New("connection refused")
	if got := redactErr(plain, db); got != plain {
		t.Errorf("redactErr(%v) = %v, want it unchanged", plain, got)
	}
	kv := redactErr(errors.New("failed: password=kvs3cret host=db"), "host=db password=kvs3cret")
	if strings.Contains(kv.Error(), "kvs3cret") {
		t.Errorf("redactErr = %q, want no password", kv)
	}
}
