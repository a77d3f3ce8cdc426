package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
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

// TestBinaryConnectionFlood runs the binary with --max-conns 100 and opens
// 500 keep-alive connections that each make a request and then idle (the
// issue's flood, scaled down): evaluation still answers on a new connection,
// and the process's open sockets come down to the limit, counted in
// /proc/PID/fd.
func TestBinaryConnectionFlood(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc to count the server's sockets")
	}
	const limit, flood = 100, 500
	db := filepath.Join(t.TempDir(), "rollout.db")
	p := startBinary(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", db, "--max-conns", fmt.Sprint(limit), "--idle-timeout", "1h")
	if res := p.post(t, "/api/features", `{"key":"f","buckets":[{"name":"A","replicas":3},{"name":"B","replicas":3}]}`); res.StatusCode != 201 {
		t.Fatalf("create = %d", res.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
	addr := strings.TrimPrefix(p.url, "http://")
	for i := range flood {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer c.Close()
		if _, err := fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("connection %d: GET /healthz = %v, %v", i, res, err)
		}
		res.Body.Close()
	}
	// A new client is answered.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Get(p.url + "/evaluate?feature=f&user=u1")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("evaluate under the flood: %v, %v", res, err)
	}
	res.Body.Close()

	// Closed connections release their descriptors as the server's
	// goroutines notice; wait for the count to settle at the bound.
	pid := p.cmd.Process.Pid
	var sockets, fds int
	for range 100 {
		sockets, fds = countSockets(t, pid)
		if sockets <= limit+1 { // and the listener
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("after %d idle connections: the server holds %d sockets, %d file descriptors in all", flood, sockets, fds)
	if sockets > limit+1 {
		t.Errorf("the server holds %d sockets after %d idle connections, want at most %d (the limit and the listener)", sockets, flood, limit+1)
	}
	// The log, read once the process has exited, says what happened.
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-p.exited; err != nil {
		t.Errorf("rollout exited with %v after SIGTERM", err)
	}
	for _, want := range []string{"connection limit reached", "closed_to_make_room="} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, p.stderr)
		}
	}
}

// countSockets returns the sockets and all file descriptors process pid
// holds open.
func countSockets(t *testing.T, pid int) (sockets, fds int) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			sockets++
		}
	}
	return sockets, len(entries)
}
