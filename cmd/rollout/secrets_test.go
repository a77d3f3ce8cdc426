package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/store/storetest"
)

// Passwords put in the DSNs below. PostgreSQL in the tests trusts every
// connection from loopback, so the server accepts them whatever they are.
const (
	userinfoPassword = "Ui-pw-7f3a91"
	queryPassword    = "Qs-pw-91b2c4"
	keyValuePassword = "Kv-pw-3c4d5e"
)

// passwordDSNs returns one database's DSN in each form, with passwords.
func passwordDSNs(t *testing.T) map[string]string {
	t.Helper()
	u, err := url.Parse(storetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	withUser := *u
	withUser.User = url.UserPassword(u.User.Username(), userinfoPassword)
	withQuery := *u
	q := withQuery.Query()
	q.Set("password", queryPassword)
	withQuery.RawQuery = q.Encode()
	return map[string]string{
		"url user info":  withUser.String(),
		"url ?password=": withQuery.String(),
		"key=value": fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s sslmode=disable",
			u.Hostname(), u.Port(), u.User.Username(), keyValuePassword, strings.TrimPrefix(u.Path, "/")),
	}
}

// wantNoPassword fails t if any of texts shows a password.
func wantNoPassword(t *testing.T, what string, texts ...string) {
	t.Helper()
	for _, text := range texts {
		for _, pw := range []string{userinfoPassword, queryPassword, keyValuePassword} {
			if strings.Contains(text, pw) {
				t.Errorf("%s shows the password %q:\n%s", what, pw, text)
			}
		}
	}
}

// serveUntilReady runs 'rollout serve' with args in process until its
// start-up is logged, then stops it, and returns its logs.
func serveUntilReady(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve"}, args...), &bytes.Buffer{}, logs, func(string) string { return "" })
	}()
	deadline := time.After(time.Minute)
	for !strings.Contains(logs.String(), "rollout serving") {
		select {
		case err := <-done:
			t.Fatalf("rollout serve %q ended: %v\n%s", args, err, logs)
		case <-deadline:
			t.Fatalf("rollout serve %q did not start in a minute:\n%s", args, logs)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("rollout serve %q: %v", args, err)
	}
	return logs.String()
}

// TestDatabasePasswordsNeverPrinted: whichever form the PostgreSQL DSN takes
// and wherever it holds its password, no run of the commands prints the
// password: not the start-up logs and no-token advice of serve, not its
// refusal to listen beyond loopback, not migrate's report, not help, and
// not the errors of a database that cannot be reached or a DSN that does
// not parse. The key=value form is taken for PostgreSQL, not a file name.
func TestDatabasePasswordsNeverPrinted(t *testing.T) {
	for _, name := range []string{"url user info", "url ?password=", "key=value"} {
		t.Run(name, func(t *testing.T) {
			dsn := passwordDSNs(t)[name] // a database of its own
			logs := serveUntilReady(t, "--addr", "127.0.0.1:0", "--db", dsn)
			wantNoPassword(t, "serve's logs", logs)
			if !strings.Contains(logs, "rollout token create --name admin --role admin --db ") || !strings.Contains(logs, "xxxxx") {
				t.Errorf("serve's logs do not advise creating a token in this database, password hidden:\n%s", logs)
			}

			var out, errb bytes.Buffer
			err := run(context.Background(), []string{"serve", "--addr", "0.0.0.0:0", "--db", dsn}, &out, &errb, func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), "refusing to listen") {
				t.Fatalf("serve on 0.0.0.0 with no token: err = %v, want a refusal", err)
			}
			wantNoPassword(t, "serve's refusal", err.Error(), out.String(), errb.String())

			target := filepath.Join(t.TempDir(), "copy.db")
			stdout, stderr, err := runCLI(t, "migrate", "--from", dsn, "--to", target)
			if err != nil {
				t.Fatalf("migrate: %v\n%s", err, stderr)
			}
			wantNoPassword(t, "migrate's report", stdout, stderr)
			if !strings.Contains(stdout, "xxxxx") {
				t.Errorf("migrate's report does not name the source:\n%s", stdout)
			}
			stdout, stderr, err = runCLI(t, "token", "create", "--name", "admin", "--role", "admin", "--db", dsn)
			if err != nil {
				t.Fatalf("token create: %v\n%s", err, stderr)
			}
			wantNoPassword(t, "token create", stdout, stderr)
			stdout, stderr, err = runCLI(t, "migrate", "--from", target, "--to", dsn)
			if err == nil {
				t.Fatalf("migrate into a database that is not empty succeeded")
			}
			wantNoPassword(t, "migrate's refusal", stdout, stderr, err.Error())

			out.Reset()
			env := func(k string) string {
				if k == "ROLLOUT_DB" {
					return dsn
				}
				return ""
			}
			if err := run(context.Background(), []string{"serve", "-h"}, &out, &errb, env); err != nil {
				t.Fatal(err)
			}
			wantNoPassword(t, "serve -h with ROLLOUT_DB", out.String())
		})
	}

	// Errors of databases that cannot be opened.
	for _, dsn := range []string{
		"postgres://root:" + userinfoPassword + "@127.0.0.1:1/rollout?sslmode=disable&connect_timeout=2&password=" + queryPassword,
		"postgres://root:" + userinfoPassword + "@127.0.0.1:notaport/rollout",
		"postgres://root:" + userinfoPassword + "@[::1/rollout",
		"postgresql://root@127.0.0.1:1/rollout?password=" + queryPassword + "&connect_timeout=x",
		"host=127.0.0.1 port=1 user=root password=" + keyValuePassword + " dbname=rollout connect_timeout=2 sslmode=disable",
		"host=127.0.0.1 port=notaport password=" + keyValuePassword,
		"host=127.0.0.1 password='" + keyValuePassword,
	} {
		for _, args := range [][]string{
			{"token", "list", "--db", dsn},
			{"migrate", "--from", dsn, "--to", filepath.Join(t.TempDir(), "x.db")},
			{"serve", "--addr", "127.0.0.1:0", "--db", dsn},
		} {
			stdout, stderr, err := runCLI(t, args...)
			if err == nil {
				t.Errorf("rollout %q succeeded, want an error", args)
				continue
			}
			wantNoPassword(t, fmt.Sprintf("rollout %q", args), stdout, stderr, err.Error())
			if errors.Is(err, context.Canceled) {
				t.Errorf("rollout %q: %v", args, err)
			}
		}
	}
}

// TestNoTokenAdviceNamesTheDatabase: the command the no-token warning
// offers writes the token into the database this server uses, so that
// copying it works.
func TestNoTokenAdviceNamesTheDatabase(t *testing.T) {
	db := filepath.Join(t.TempDir(), "my data", "rollout.db")
	if err := os.MkdirAll(filepath.Dir(db), 0o755); err != nil {
		t.Fatal(err)
	}
	logs := serveUntilReady(t, "--addr", "127.0.0.1:0", "--db", db)
	if want := "rollout token create --name admin --role admin --db '" + db + "'"; !strings.Contains(logs, want) {
		t.Errorf("serve's logs do not advise %q:\n%s", want, logs)
	}
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"serve", "--addr", "0.0.0.0:0", "--db", db}, &out, &errb, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "--db '"+db+"'") {
		t.Errorf("serve on 0.0.0.0 with no token: err = %v, want advice naming --db %s", err, db)
	}
}
