// Package docs holds rollout's documentation. Its tests check that the
// relative links of the README and of every page here lead somewhere, and
// that the curl recipes answer as written.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeRe    = regexp.MustCompile("`[^`]*`")
	headingRe = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	schemeRe  = regexp.MustCompile(`^[a-z]+:`)
)

// TestLinks: every relative link of README.md and docs/*.md names a file
// that exists and, with a fragment, a heading of that file (as GitHub
// makes anchors of headings).
func TestLinks(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join("..", "README.md"))
	checked := 0
	for _, page := range pages {
		lines, err := prose(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range lines {
			line = codeRe.ReplaceAllString(line, "")
			for _, m := range linkRe.FindAllStringSubmatch(line, -1) {
				link := m[1]
				if schemeRe.MatchString(link) {
					continue
				}
				checked++
				if err := resolve(page, link); err != nil {
					t.Errorf("%s:%d: link %s: %v", page, i+1, link, err)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked %d relative links, want at least 50: is the link pattern still right?", checked)
	}
}

// resolve reports whether link, found in page, leads to an existing file
// and anchor.
func resolve(page, link string) error {
	path, frag, _ := strings.Cut(link, "#")
	target := page
	if path != "" {
		target = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
	}
	if _, err := os.Stat(target); err != nil {
		return fmt.Errorf("no file %s", target)
	}
	if frag == "" || !strings.HasSuffix(target, ".md") {
		return nil
	}
	anchors, err := anchorsOf(target)
	if err != nil {
		return err
	}
	if !anchors[frag] {
		return fmt.Errorf("no heading of %s has the anchor #%s", target, frag)
	}
	return nil
}

// prose returns the lines of a Markdown file, with those inside fenced code
// blocks blanked.
func prose(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			lines[i] = ""
		} else if fenced {
			lines[i] = ""
		}
	}
	return lines, nil
}

// anchorsOf returns the anchors GitHub makes of a Markdown file's headings:
// lower case, punctuation dropped, spaces made hyphens, and -1, -2, … after
// a repeated one.
func anchorsOf(path string) (map[string]bool, error) {
	lines, err := prose(path)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range lines {
		m := headingRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	}
	return anchors, nil
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Changes: dry runs, churn limits and If-Match": "changes-dry-runs-churn-limits-and-if-match",
		"Over HTTP: /evaluate":                         "over-http-evaluate",
		"The Go client: evaluate in process":           "the-go-client-evaluate-in-process",
		"Changes, start-up, and evaluation":            "changes-start-up-and-evaluation",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
