package provider_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeExample: the OpenFeature example of docs/client.md builds.
func TestReadmeExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	doc, err := os.ReadFile("../../../docs/client.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- kept compiling by TestReadmeExample in api/client/provider -->\n```go\n"
	_, rest, ok := strings.Cut(string(doc), marker)
	if !ok {
		t.Fatalf("docs/client.md has no %q", marker)
	}
	code, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("the example of docs/client.md does not end")
	}
	dir := t.TempDir()
	main := filepath.Join(dir, "main.go")
	if err := os.WriteFile(main, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "example"), main)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the example of docs/client.md: %v\n%s\n%s", err, out, code)
	}
}
