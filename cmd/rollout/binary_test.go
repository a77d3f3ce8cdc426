package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// binary is the rollout binary built once for the tests that run it as a
// subprocess.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rollout-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "rollout")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildBinary(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(binary); err == nil {
		return binary
	}
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return binary
}

// process is the rollout binary running on a loopback port.
type process struct {
	cmd    *exec.Cmd
	url    string
	stderr *strings.Builder
	exited chan error
}

var servingURL = regexp.MustCompile(`msg="rollout serving" url=(\S+)`)

// startBinary runs the binary with args and env and waits until it serves.
func startBinary(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, stderr: &strings.Builder{}, exited: make(chan error, 1)}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.stderr.WriteString(sc.Text() + "\n")
			if m := servingURL.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	select {
	case p.url = <-found:
		return p
	case err := <-p.exited:
		t.Fatalf("rollout exited before serving: %v\n%s", err, p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("rollout did not serve within 30s:\n%s", p.stderr)
	}
	return nil
}

func (p *process) post(t *testing.T, path, body string) *http.Response {
	t.Helper()
	res, err := http.Post(p.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v map[string]any
	json.NewDecoder(res.Body).Decode(&v)
	return res.StatusCode, v
}

// TestBinaryGracefulShutdown runs the real binary configured through the
// environment, stops it with SIGTERM, and checks that it exits cleanly with
// its evaluation counts flushed, then serves the same data configured
// through flags.
func TestBinaryGracefulShutdown(t *testing.T) {
	db := filepath.Join(t.TempDir(), "my rollout.db")
	p := startBinary(t, []string{"ROLLOUT_ADDR=127.0.0.1:0", "ROLLOUT_DB=" + db}, "serve")
	if res := p.post(t, "/api/features", `{"key":"f","salt":"","buckets":[{"name":"A","replicas":3},{"name":"B","replicas":3}]}`); res.StatusCode != 201 {
		t.Fatalf("create = %d", res.StatusCode)
	}
	for i := range 10 {
		if status, _ := getJSON(t, fmt.Sprintf("%s/evaluate?feature=f&user=u%d", p.url, i)); status != 200 {
			t.Fatalf("evaluate = %d", status)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("rollout exited with %v after SIGTERM, want 0:\n%s", err, p.stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("rollout did not exit within 15s of SIGTERM:\n%s", p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "shutting down") {
		t.Errorf("no shutdown line in the log:\n%s", p.stderr)
	}

	p = startBinary(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", db)
	if status, f := getJSON(t, p.url+"/api/features/f"); status != 200 || f["version"] != 1.0 {
		t.Fatalf("after restart: GET feature = %d %v", status, f)
	}
	if _, e := getJSON(t, p.url+"/api/features/f/exposures"); e["total"] != 10.0 {
		t.Errorf("after restart: %v evaluations counted, want the 10 served before SIGTERM", e["total"])
	}
}

func TestBinaryRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--log-format", "xml"},
		{"--flush-interval", "0s"},
		{"frobnicate"},
		{"serve", "extra"},
	} {
		out, err := exec.Command(buildBinary(t), args...).CombinedOutput()
		if err == nil {
			t.Errorf("rollout %v succeeded, want an error:\n%s", args, out)
		}
	}
}
