package client_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestBuildsWithoutCgo: the client and its OpenFeature provider import
// nothing of the server (no echo, SQLite, pgx or Prometheus), and an app
// that uses them builds with CGO_ENABLED=0.
func TestBuildsWithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	list := exec.Command("go", "list", "-deps", "./example", ".", "./provider")
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/rollout/rollout/api", "github.com/rollout/rollout/store", "github.com/labstack/", "github.com/mattn/go-sqlite3", "github.com/prometheus/", "github.com/jackc/", "github.com/pressly/"} {
			if dep == banned || strings.HasPrefix(dep, banned) && !strings.HasPrefix(dep, "github.com/rollout/rollout/api/client") {
				t.Errorf("the client, its provider or the example depends on %s", dep)
			}
		}
	}
	build := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "example"), "./example")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./example: %v\n%s", err, out)
	}
}

// goLine is the go line of a go.mod file.
var goLine = regexp.MustCompile(`(?m)^go (\S+)$`)

// app is a module outside the repository, example.com/app, whose go.mod
// declares goVersion and requires only the client's module, with the
// replace lines an app uses before the client is published (see
// docs/client.md), and whose main.go is main.
func app(t *testing.T, goVersion, main string) string {
	t.Helper()
	client, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(client, "..", "..")
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/app\n\ngo "+goVersion+"\n\nrequire github.com/rollout/rollout/api/client v0.0.0\n\nreplace (\n"+
		"\tgithub.com/rollout/rollout/api/client => "+client+"\n"+
		"\tgithub.com/rollout/rollout/rollout/feature => "+filepath.Join(repo, "rollout", "feature")+"\n"+
		"\tgithub.com/rollout/rollout/ring => "+filepath.Join(repo, "ring")+"\n)\n")
	write("main.go", main)
	return dir
}

// goIn runs the go command in dir, outside any workspace, as an app's
// build would, and returns its output.
func goIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// clientGo returns the go line of the client's module.
func clientGo(t *testing.T) string {
	t.Helper()
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := goLine.FindSubmatch(mod)
	if m == nil {
		t.Fatal("the client's go.mod has no go line")
	}
	return string(m[1])
}

const clientMain = `package main

import (
	"context"
	"fmt"

	"github.com/rollout/rollout/api/client"
)

func main() {
	c, err := client.New(context.Background(), client.Config{URL: "http://127.0.0.1:8080"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	fmt.Println(c.Evaluate("checkout", "user1"))
}
`

const providerMain = `package main

import (
	"context"
	"fmt"

	"github.com/open-feature/go-sdk/openfeature"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/api/client/provider"
)

func main() {
	c, err := client.New(context.Background(), client.Config{URL: "http://127.0.0.1:8080"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	openfeature.SetProvider(provider.New(c))
	fmt.Println(c.Evaluate("checkout", "user1"))
}
`

// TestAppOnOldestGo: an app whose go.mod declares the oldest Go that the
// client's module declares builds against the client and the provider,
// and go mod tidy leaves its go line alone: importing the client never
// raises an app's go line.
func TestAppOnOldestGo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	oldest := clientGo(t)
	if strings.Count(oldest, ".") != 2 || !strings.HasSuffix(oldest, ".0") {
		t.Errorf("the client's go.mod says go %s, want the oldest patch release its dependencies allow (1.N.0)", oldest)
	}
	dir := app(t, oldest, providerMain)
	goIn(t, dir, "mod", "tidy")
	tidied, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if m := goLine.FindSubmatch(tidied); m == nil || string(m[1]) != oldest {
		t.Errorf("go mod tidy changed the app's go line to %q, want go %s:\n%s", m, oldest, tidied)
	}
	goIn(t, dir, "build", "-o", filepath.Join(dir, "app"), ".")
}

// serverModules are modules of the server that an app of the client must
// not get; testOnly are those the OpenFeature SDK's own go.mod requires
// (for its tests), which an app that imports the provider gets in its
// module graph, but no app that imports the client alone.
var (
	serverModules = []string{"github.com/rollout/rollout", "github.com/labstack/echo", "github.com/mattn/go-sqlite3", "github.com/jackc/pgx",
		"github.com/prometheus/", "github.com/pressly/goose", "github.com/chromedp/"}
	testOnly = []string{"github.com/cucumber/godog", "github.com/stretchr/testify"}
)

// TestAppModules: an app that requires only the client's module (as
// docs/client.md says) lists none of the server's modules in go list -m
// all, nor any test framework; with the provider too, none of the
// server's modules.
func TestAppModules(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	for _, tt := range []struct {
		name   string
		main   string
		banned []string
	}{
		{"client", clientMain, append(slices.Clone(serverModules), testOnly...)},
		{"client and provider", providerMain, serverModules},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := app(t, clientGo(t), tt.main)
			goIn(t, dir, "mod", "tidy")
			goIn(t, dir, "build", "-o", filepath.Join(dir, "app"), ".")
			for _, line := range strings.Split(strings.TrimSpace(goIn(t, dir, "list", "-m", "all")), "\n") {
				mod := strings.Fields(line)[0]
				for _, b := range tt.banned {
					if isModule(mod, b) {
						t.Errorf("go list -m all of an app of the %s lists %s", tt.name, line)
					}
				}
			}
		})
	}
}

// isModule reports whether mod is the module b (one of its major versions:
// b/v4), or, for a b ending in "/", any module under it. The server's
// module is github.com/rollout/rollout alone: the client's and the pure
// package's modules are under its path.
func isModule(mod, b string) bool {
	switch {
	case strings.HasSuffix(b, "/"):
		return strings.HasPrefix(mod, b)
	case b == "github.com/rollout/rollout":
		return mod == b
	}
	return mod == b || strings.HasPrefix(mod, b+"/")
}
