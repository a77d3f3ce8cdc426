package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/cmd/internal/serve"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

const (
	sessionKey1 = "1111111111111111111111111111111111111111111111111111111111111111"
	sessionKey2 = "2222222222222222222222222222222222222222222222222222222222222222"
)

// openServe parses args and getenv as 'rollout serve' does and opens the
// server, logging to logs.
func openServe(t *testing.T, logs *syncBuffer, getenv func(string) string, args ...string) *serve.Server {
	t.Helper()
	s, err := parseServe(args, &bytes.Buffer{}, logs, getenv)
	if err != nil {
		t.Fatalf("parseServe(%q): %v", args, err)
	}
	if err := s.Open(context.Background()); err != nil {
		t.Fatalf("open server: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func noEnv(string) string { return "" }

// signInTo signs in on the server at url with the token secret.
func signInTo(t *testing.T, url, secret string) *http.Cookie {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Post(url+"/ui/login", "application/x-www-form-urlencoded", strings.NewReader("token="+secret))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == api.SessionCookie {
			return c
		}
	}
	t.Fatalf("sign-in = %d without a session cookie", res.StatusCode)
	return nil
}

// withSession is the status of GET /api/features on url with the cookie.
func withSession(t *testing.T, url string, ck *http.Cookie) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/api/features", nil)
	req.AddCookie(ck)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func writeKeys(t *testing.T, path string, keys ...string) {
	t.Helper()
	text := "# dashboard session keys: the first signs\n" + strings.Join(keys, "\n") + "\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSessionKeyFromFile: with the key from a file, a session signed with
// the key kept in the database (which anyone with the database or a backup
// can read) is refused; rotating the file's keys keeps old sessions while
// the old key is listed second, and ends them once it is dropped.
func TestSessionKeyFromFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "rollout.db")
	secret := createToken(t, db, "admin", "admin")
	keyFile := filepath.Join(t.TempDir(), "session.keys")
	writeKeys(t, keyFile, sessionKey1)

	logs := &syncBuffer{}
	s := openServe(t, logs, noEnv, "--addr", "127.0.0.1:0", "--db", db, "--session-key-file", keyFile)
	if strings.Contains(logs.String(), "signed with the key kept in the database") {
		t.Errorf("the server warns of the database's key while given one:\n%s", logs)
	}
	first := signInTo(t, s.URL(), secret)
	if got := withSession(t, s.URL(), first); got != 200 {
		t.Fatalf("GET /api/features with a session = %d, want 200", got)
	}

	// Someone with the database signs a session with its key.
	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	dbKey, err := st.SessionKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewTokens(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := rollout.NewService(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	access := api.NewAuth(tokens, dbKey)
	e := api.New(svc, api.Options{Auth: access, Routes: web.Routes(svc, web.Options{Sessions: access})})
	forger := httptest.NewServer(e)
	forged := signInTo(t, forger.URL, secret)
	forger.Close()
	st.Close()
	if got := withSession(t, s.URL(), forged); got != 401 {
		t.Errorf("a session signed with the database's key = %d, want 401", got)
	}
	s.Close()

	writeKeys(t, keyFile, sessionKey2, sessionKey1)
	s = openServe(t, logs, noEnv, "--addr", "127.0.0.1:0", "--db", db, "--session-key-file", keyFile)
	if got := withSession(t, s.URL(), first); got != 200 {
		t.Errorf("a session signed with the old key, now second = %d, want 200", got)
	}
	second := signInTo(t, s.URL(), secret)
	s.Close()

	writeKeys(t, keyFile, sessionKey2)
	s = openServe(t, logs, noEnv, "--addr", "127.0.0.1:0", "--db", db, "--session-key-file", keyFile)
	if got := withSession(t, s.URL(), first); got != 401 {
		t.Errorf("a session signed with a dropped key = %d, want 401", got)
	}
	if got := withSession(t, s.URL(), second); got != 200 {
		t.Errorf("a session signed with the new key = %d, want 200", got)
	}
}

// TestSessionKeyFlags: the keys come from the flags or the environment,
// once; a key never appears in help or errors; a key file others may read
// is refused; with no key given, a server with tokens warns that the
// database's key signs its sessions.
func TestSessionKeyFlags(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "session.keys")
	writeKeys(t, keyFile, sessionKey1, sessionKey2)
	env := func(vars ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(vars); i += 2 {
				if vars[i] == k {
					return vars[i+1]
				}
			}
			return ""
		}
	}
	for _, tt := range []struct {
		name   string
		args   []string
		getenv func(string) string
		keys   int
	}{
		{"file flag", []string{"--session-key-file", keyFile}, noEnv, 2},
		{"file from the environment", nil, env("ROLLOUT_SESSION_KEY_FILE", keyFile), 2},
		{"keys flag", []string{"--session-key", sessionKey2 + "," + sessionKey1}, noEnv, 2},
		{"keys from the environment", nil, env("ROLLOUT_SESSION_KEY", sessionKey1), 1},
		{"none", nil, noEnv, 0},
	} {
		s, err := parseServe(tt.args, &bytes.Buffer{}, &bytes.Buffer{}, tt.getenv)
		if err != nil || len(s.SessionKeys) != tt.keys {
			t.Errorf("%s: %d keys, %v; want %d", tt.name, len(s.SessionKeys), err, tt.keys)
		}
	}

	readable := filepath.Join(dir, "readable.keys")
	if err := os.WriteFile(readable, []byte(sessionKey1+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := sessionKey1[:60] + "zz" + sessionKey1[62:]
	for _, tt := range []struct {
		name   string
		args   []string
		getenv func(string) string
	}{
		{"both flags", []string{"--session-key", sessionKey1, "--session-key-file", keyFile}, noEnv},
		{"flag and environment", []string{"--session-key-file", keyFile}, env("ROLLOUT_SESSION_KEY", sessionKey1)},
		{"file anyone may read", []string{"--session-key-file", readable}, noEnv},
		{"not hex", []string{"--session-key", bad}, noEnv},
		{"too short", []string{"--session-key", sessionKey1[:62]}, noEnv},
		{"missing file", []string{"--session-key-file", filepath.Join(dir, "nope")}, noEnv},
	} {
		_, err := parseServe(tt.args, &bytes.Buffer{}, &bytes.Buffer{}, tt.getenv)
		if err == nil {
			t.Errorf("%s: parseServe accepted it", tt.name)
			continue
		}
		if strings.Contains(err.Error(), sessionKey1[:40]) || strings.Contains(err.Error(), bad[40:]) {
			t.Errorf("%s: the error shows the key: %v", tt.name, err)
		}
	}

	var help bytes.Buffer
	if err := run(context.Background(), []string{"serve", "-h"}, &help, &bytes.Buffer{}, env("ROLLOUT_SESSION_KEY", sessionKey1)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(help.String(), "-session-key-file") || strings.Contains(help.String(), sessionKey1) {
		t.Errorf("serve -h with ROLLOUT_SESSION_KEY set shows the key or lacks --session-key-file:\n%s", help.String())
	}

	db := filepath.Join(dir, "rollout.db")
	createToken(t, db, "admin", "admin")
	logs := &syncBuffer{}
	openServe(t, logs, noEnv, "--addr", "127.0.0.1:0", "--db", db).Close()
	if !strings.Contains(logs.String(), "signed with the key kept in the database") {
		t.Errorf("a server using the database's session key does not warn of it:\n%s", logs)
	}
}
