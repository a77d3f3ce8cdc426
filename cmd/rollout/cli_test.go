package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
)

// TestHelp: every way of asking for help answers on stdout, exits 0 and
// lists what it should; a command's help lists only the flags it uses.
func TestHelp(t *testing.T) {
	everyCommand := []string{"rollout [serve]", "rollout simulate", "rollout token create", "rollout token list",
		"rollout token revoke", "rollout backup", "rollout migrate", "rollout version", "rollout help"}
	tests := []struct {
		args    []string
		want    []string // in stdout
		notWant []string
	}{
		{[]string{"-h"}, everyCommand, nil},
		{[]string{"--help"}, everyCommand, nil},
		{[]string{"help"}, everyCommand, nil},
		{[]string{"serve", "-h"}, []string{"usage: rollout serve", "-addr", "-db", "-max-conns", "-max-streams", "-max-streams-per-token", "-idle-timeout", "-log-format"}, nil},
		{[]string{"--db", "x.db", "-h"}, []string{"usage: rollout serve"}, nil},
		{[]string{"simulate", "-h"}, []string{"usage: rollout simulate", "-replicas", "1 to 20000 replicas"}, []string{"-db"}},
		{[]string{"token", "-h"}, []string{"rollout token create", "rollout token list", "rollout token revoke"}, nil},
		{[]string{"token", "--help"}, []string{"rollout token create"}, nil},
		{[]string{"help", "token"}, []string{"rollout token create"}, nil},
		{[]string{"token", "create", "-h"}, []string{"usage: rollout token create", "-name", "-role", "-db"}, nil},
		{[]string{"token", "list", "-h"}, []string{"usage: rollout token list", "-db"}, []string{"-name", "-role"}},
		{[]string{"help", "token", "list"}, []string{"usage: rollout token list"}, []string{"-name"}},
		{[]string{"token", "revoke", "-h"}, []string{"usage: rollout token revoke", "-name", "-db"}, []string{"-role"}},
		{[]string{"backup", "-h"}, []string{"usage: rollout backup", "TARGET", "-db"}, nil},
		{[]string{"backup", "out.db", "--help"}, []string{"usage: rollout backup"}, nil},
		{[]string{"version", "-h"}, []string{"usage: rollout version"}, nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir) // nothing may be created by asking for help
			stdout, stderr, err := runCLI(t, tt.args...)
			if err != nil {
				t.Fatalf("rollout %q = %v, want no error (exit 0); stderr:\n%s", tt.args, err, stderr)
			}
			for _, want := range tt.want {
				if !strings.Contains(stdout, want) {
					t.Errorf("rollout %q printed:\n%s\nwant it to contain %q", tt.args, stdout, want)
				}
			}
			for _, no := range tt.notWant {
				if strings.Contains(stdout, no) {
					t.Errorf("rollout %q printed:\n%s\nwant no %q", tt.args, stdout, no)
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) > 0 {
				t.Errorf("rollout %q created %s", tt.args, entries[0].Name())
			}
		})
	}
}

// TestHelpExitCodes runs the binary: help exits 0, a usage error 1 with
// the error on stderr.
func TestHelpExitCodes(t *testing.T) {
	bin := buildBinary(t)
	for _, args := range [][]string{{"--help"}, {"help"}, {"token", "-h"}, {"token", "list", "-h"}, {"backup", "-h"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = t.TempDir()
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "usage") && !strings.Contains(string(out), "Usage") {
			t.Errorf("rollout %q = %v with stdout %q, want exit 0 and the help", args, err, out)
		}
	}
	for _, args := range [][]string{{"frobnicate"}, {"token"}, {"token", "frob"}, {"backup", "--bogus", "x"}} {
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.HasPrefix(lastLine(stderr.String()), "rollout: ") {
			t.Errorf("rollout %q = %v, stderr %q; want exit 1 and the error on stderr", args, err, &stderr)
		}
	}
}

// TestMissingDatabaseRefused: only serve creates a database; every other
// command refuses a path that does not exist, creating nothing.
func TestMissingDatabaseRefused(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.db")
	out := filepath.Join(dir, "out.db")
	for _, args := range [][]string{
		{"backup", "--db", typo, out},
		{"backup", out, "--db", typo},
		{"token", "list", "--db", typo},
		{"token", "create", "--name", "ci", "--role", "editor", "--db", typo},
		{"token", "revoke", "--name", "ci", "--db", typo},
	} {
		_, _, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), "database "+typo+" does not exist") {
			t.Errorf("rollout %q = %v, want a refusal saying the database does not exist", args, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Fatalf("rollout %q created %s", args, entries[0].Name())
		}
	}
	if _, _, err := runCLI(t, "token", "list", "--db", dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("token list --db DIR = %v, want a refusal saying it is a directory", err)
	}
}

// TestFlagsAfterArguments: flags may follow positional arguments; "--"
// ends them.
func TestFlagsAfterArguments(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "rollout.db")
	createDatabase(t, db)
	if _, stderr, err := runCLI(t, "backup", filepath.Join(dir, "a.db"), "--db", db); err != nil {
		t.Fatalf("backup OUT --db P: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.db")); err != nil {
		t.Errorf("backup OUT --db P wrote no OUT: %v", err)
	}
	t.Chdir(dir)
	if _, stderr, err := runCLI(t, "backup", "--db", db, "--", "-b.db"); err != nil {
		t.Fatalf("backup --db P -- -b.db: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "-b.db")); err != nil {
		t.Errorf("backup -- -b.db wrote no -b.db: %v", err)
	}
	if _, _, err := runCLI(t, "backup", "a.db", "b.db", "--db", db); err == nil || !strings.Contains(err.Error(), "give one target") {
		t.Errorf("backup with two targets = %v, want a refusal", err)
	}
	list, _, err := runCLI(t, "token", "list", "--db", db)
	if err != nil || !strings.HasPrefix(list, "NAME") {
		t.Errorf("token list --db P = %q, %v", list, err)
	}
}

// TestVersion runs the built binary: version and --version print the
// module version, and the VCS revision the build recorded (none in a git
// worktree or with -buildvcs=false), as `go version -m` reads them.
func TestVersion(t *testing.T) {
	bin := buildBinary(t)
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	var modVersion, revision string
	sc := bufio.NewScanner(bytes.NewReader(info))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[0] == "mod":
			modVersion = f[2]
		case len(f) >= 2 && strings.HasPrefix(f[1], "vcs.revision="):
			revision = strings.TrimPrefix(f[1], "vcs.revision=")
		}
	}
	wantRevision := "revision unknown"
	if revision != "" {
		wantRevision = "revision " + revision
	}
	var outputs []string
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil {
			t.Fatalf("rollout %s: %v", arg, err)
		}
		for _, want := range []string{"rollout " + modVersion + "\n", "module   github.com/rollout/rollout\n", wantRevision, "go       go1."} {
			if !strings.Contains(string(out), want) {
				t.Errorf("rollout %s printed:\n%s\nwant %q (go version -m says:\n%s)", arg, out, want, info)
			}
		}
		outputs = append(outputs, string(out))
	}
	if outputs[0] != outputs[1] {
		t.Errorf("rollout version and --version differ:\n%s\n%s", outputs[0], outputs[1])
	}
}

// TestStartupErrors runs the binary into start-up failures: each exits
// non-zero with one line that names the real cause and says each part of
// its context once.
func TestStartupErrors(t *testing.T) {
	bin := buildBinary(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	notSQLite := filepath.Join(dir, "notes.db")
	if err := os.WriteFile(notSQLite, []byte(strings.Repeat("not a database\n", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing directory", []string{"--db", filepath.Join(dir, "nope", "r.db")}, "directory " + filepath.Join(dir, "nope") + " does not exist"},
		{"directory is a file", []string{"--db", filepath.Join(file, "r.db")}, file + " is not a directory"},
		{"database is a directory", []string{"--db", dir}, dir + " is a directory"},
		{"not a database", []string{"--db", notSQLite}, "file is not a database"},
		{"address in use", []string{"--db", filepath.Join(dir, "r.db"), "--addr", busy.Addr().String()}, "address already in use"},
		{"bad log format", []string{"--log-format", "xml"}, `--log-format "xml"`},
		{"bad max-conns", []string{"--max-conns", "-1"}, "--max-conns -1"},
		{"max-conns beyond the file limit", []string{"--db", filepath.Join(dir, "r.db"), "--addr", "127.0.0.1:0", "--max-conns", "100000000"}, "does not fit in the open-file limit"},
		{"bad max-streams", []string{"--max-streams", "-1"}, "--max-streams -1"},
		{"streams beyond their share", []string{"--db", filepath.Join(dir, "r.db"), "--addr", "127.0.0.1:0", "--max-conns", "100", "--max-streams", "90"},
			"stream limit 90 does not leave a quarter of the connection limit 100"},
	}
	if ro := readOnlyDir(t); ro != "" {
		tests = append(tests, struct {
			name string
			args []string
			want string
		}{"read-only file system", []string{"--db", filepath.Join(ro, "r.db")}, "cannot write in directory " + ro + ": read-only file system"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, tt.args...)...)
			cmd.Dir = t.TempDir()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err == nil {
				t.Fatalf("rollout serve %q succeeded, want a start-up error", tt.args)
			}
			msg := strings.TrimSpace(lastLine(stderr.String()))
			if !strings.HasPrefix(msg, "rollout: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("rollout serve %q said %q, want %q", tt.args, msg, tt.want)
			}
			if strings.Contains(msg, "no such file or directory") && !strings.Contains(tt.want, "no such file") {
				t.Errorf("rollout serve %q said %q: no such file is not the cause", tt.args, msg)
			}
			if part, ok := repeatedPart(msg); ok {
				t.Errorf("rollout serve %q said %q: %q comes twice", tt.args, msg, part)
			}
		})
	}
}

// repeatedPart returns a ": "-separated part of msg that occurs twice, such
// as the "open database P" of "open database P: open database P: …".
func repeatedPart(msg string) (string, bool) {
	seen := map[string]bool{}
	for _, part := range strings.Split(msg, ": ") {
		if seen[part] {
			return part, true
		}
		seen[part] = true
	}
	return "", false
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// readOnlyDir mounts a read-only tmpfs and returns its path, or "" where
// mounting is not allowed (it needs root, as in CI).
func readOnlyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Logf("cannot mount a read-only tmpfs here (%v %s): skipping the read-only case", err, out)
		return ""
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// TestServeLogFlags: --log-requests, --slow-request and --log-sample and
// their environment variables reach the server; bad values are refused.
func TestServeLogFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		mode    api.RequestLog
		slow    time.Duration
		sample  int
		wantErr string
	}{
		{name: "defaults", mode: api.LogChanges, slow: api.DefaultSlowRequest},
		{name: "flags", args: []string{"--log-requests", "all", "--slow-request", "250ms", "--log-sample", "1000"},
			mode: api.LogAll, slow: 250 * time.Millisecond, sample: 1000},
		{name: "environment", env: map[string]string{"ROLLOUT_LOG_REQUESTS": "none", "ROLLOUT_SLOW_REQUEST": "2s", "ROLLOUT_LOG_SAMPLE": "10"},
			mode: api.LogNone, slow: 2 * time.Second, sample: 10},
		{name: "flag over environment", args: []string{"--log-requests", "errors"}, env: map[string]string{"ROLLOUT_LOG_REQUESTS": "none"},
			mode: api.LogErrors, slow: api.DefaultSlowRequest},
		{name: "unknown mode", args: []string{"--log-requests", "verbose"}, wantErr: "--log-requests"},
		{name: "no slow threshold", args: []string{"--slow-request", "0s"}, wantErr: "--slow-request"},
		{name: "negative sample", args: []string{"--log-sample", "-1"}, wantErr: "--log-sample"},
		{name: "bad environment", env: map[string]string{"ROLLOUT_SLOW_REQUEST": "soon"}, wantErr: "ROLLOUT_SLOW_REQUEST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			s, err := parseServe(tt.args, &stdout, &stderr, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseServe(%q) error = %v, want one naming %s", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.LogWriter.Close(context.Background())
			if s.RequestLog != tt.mode || s.SlowRequest != tt.slow || s.SampleEvaluations != tt.sample {
				t.Errorf("parseServe(%q) = log %s, slow %v, sample %d; want %s, %v, %d",
					tt.args, s.RequestLog, s.SlowRequest, s.SampleEvaluations, tt.mode, tt.slow, tt.sample)
			}
		})
	}
}

// TestServeEventRetention: --event-retention-days reaches the server (90
// by default, 0 keeping events forever); fewer days than apps may send
// events late are refused.
func TestServeEventRetention(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		days    int
		wantErr bool
	}{
		{nil, 90, false},
		{[]string{"--event-retention-days", "30"}, 30, false},
		{[]string{"--event-retention-days", "0"}, -1, false},
		{[]string{"--event-retention-days", "7"}, 0, true},
		{[]string{"--event-retention-days", "-5"}, 0, true},
	} {
		var stdout, stderr bytes.Buffer
		s, err := parseServe(tt.args, &stdout, &stderr, func(string) string { return "" })
		if tt.wantErr {
			if err == nil || !strings.Contains(err.Error(), "--event-retention-days") {
				t.Errorf("parseServe(%q) error = %v, want one naming --event-retention-days", tt.args, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("parseServe(%q) = %v", tt.args, err)
		}
		s.LogWriter.Close(context.Background())
		if s.EventRetentionDays != tt.days {
			t.Errorf("parseServe(%q) = %d days, want %d", tt.args, s.EventRetentionDays, tt.days)
		}
	}
}
