package docs

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var (
	shBlockRe  = regexp.MustCompile("(?s)```sh\n(.*?)```")
	answerRe   = regexp.MustCompile(`^# (\{.*\})(\s+\(.*\))?$`)
	servingRe  = regexp.MustCompile(`msg="rollout serving" url=(\S+)`)
	defaultURL = "R=http://127.0.0.1:8080"
)

// TestRecipes runs the curl recipes of the README and of docs/recipes.md as
// a reader would: in order, against a fresh `rollout serve`, with curl, jq
// and sed. Every command must succeed, and every answer a comment shows in
// full (a JSON object with nothing left out) must be among the answers.
func TestRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the rollout binary")
	}
	for _, tool := range []string{"bash", "curl", "jq", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the recipes need %s: %v", tool, err)
			}
			t.Skipf("the recipes need %s, which is not installed", tool)
		}
	}
	bin := filepath.Join(t.TempDir(), "rollout")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/rollout").CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/rollout: %v\n%s", err, out)
	}
	readme := recipeBlocks(t, "../README.md")
	for _, page := range []struct {
		path  string
		setup []string // blocks run first
		min   int      // blocks using $R, at least
	}{
		{"../README.md", nil, 5},
		{"recipes.md", nil, 5},
		// client.md's answers are those for the feature the README's first
		// recipe creates.
		{"client.md", readme[:2], 2},
		// Rollouts as code with curl: export, plan, apply.
		{"ascode.md", nil, 4},
	} {
		t.Run(filepath.Base(page.path), func(t *testing.T) {
			blocks := recipeBlocks(t, page.path)
			if len(blocks) < page.min {
				t.Fatalf("%s has %d shell blocks using $R, want at least %d", page.path, len(blocks), page.min)
			}
			runRecipes(t, bin, append(page.setup, blocks...))
		})
	}
}

// recipeBlocks returns the shell blocks of a Markdown file that use $R.
func recipeBlocks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range shBlockRe.FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], "$R") || strings.Contains(m[1], defaultURL) {
			blocks = append(blocks, m[1])
		}
	}
	return blocks
}

// runRecipes runs blocks, one after another in the same directory, against
// a new server.
func runRecipes(t *testing.T, bin string, blocks []string) {
	dir := t.TempDir()
	url := serve(t, bin, filepath.Join(dir, "rollout.db"))
	for i, block := range blocks {
		// Files a block writes (plan.json) stay in dir for the next ones.
		script := "set -euo pipefail\nR=" + url + "\n" + strings.ReplaceAll(block, defaultURL, "R="+url)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("block %d failed: %v\n--- block\n%s--- output\n%s", i+1, err, block, out)
		}
		for _, line := range strings.Split(block, "\n") {
			m := answerRe.FindStringSubmatch(strings.TrimSpace(line))
			if m == nil || !json.Valid([]byte(m[1])) {
				continue
			}
			if !strings.Contains(string(out), m[1]) {
				t.Errorf("block %d: the answer %s is not among the answers:\n%s", i+1, m[1], out)
			}
		}
	}
}

// serve starts `rollout serve` on a loopback port over a new database and
// returns its URL; it is stopped when t ends.
func serve(t *testing.T, bin, db string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--db", db)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Logf("rollout serve: %v", err)
		}
	})
	found := make(chan string, 1)
	done := make(chan struct{})
	var log strings.Builder // read once done is closed
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := servingRe.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
			log.WriteString(sc.Text() + "\n")
		}
	}()
	select {
	case url := <-found:
		return url
	case <-done:
	case <-time.After(time.Minute): // a guard against a hang, not a measure
		cmd.Process.Kill()
		<-done
	}
	t.Fatalf("rollout serve did not serve:\n%s", log.String())
	return ""
}
