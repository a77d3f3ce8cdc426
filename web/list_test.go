package web_test

import (
	"context"
	"html"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
)

// TestUserViewLimits: the user view answers bad and oversized questions
// with a 422 page that says why, never a 5xx.
func TestUserViewLimits(t *testing.T) {
	a := newApp(t, 100)
	a.seed(t)
	many := strings.Builder{}
	for i := range 65 {
		many.WriteString("a" + strconv.Itoa(i) + "=1\n")
	}
	tests := []struct {
		name, user, attrs string
		status            int
		want              string
	}{
		{"answer", "ada", "country=FR\nplan=pro\n# a comment\n\nplan=team", 200, `data-key="checkout"`},
		{"no user", "", "country=FR", 422, "user ID must be 1 to 256 bytes"},
		{"long user", strings.Repeat("u", 257), "", 422, "user ID must be 1 to 256 bytes"},
		{"not key=value", "ada", "country", 422, "is not key=value"},
		{"bad name", "ada", "1country=FR", 422, "is invalid"},
		{"long value", "ada", "k=" + strings.Repeat("v", 1025), 422, "at most 1024 bytes"},
		{"too many", "ada", many.String(), 422, "at most 64 attributes"},
		{"huge", "ada", strings.Repeat("k=v\n", 5000), 422, "at most 16384"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := url.Values{"user": {tt.user}, "attributes": {tt.attrs}}
			rec := a.get(t, "/ui/user?"+q.Encode())
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Errorf("GET /ui/user (%s) = %d, want %d with %q", tt.name, rec.Code, tt.status, tt.want)
			}
		})
	}
	if rec := a.get(t, "/ui/user"); rec.Code != 200 || strings.Contains(rec.Body.String(), `id="user-result"`) {
		t.Errorf("GET /ui/user without a question = %d, want 200 and the form alone", rec.Code)
	}
}

// TestListStatuses: the list's chips and filters on the server, as a page
// without its script gets them.
func TestListStatuses(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)}
	a := newLiveApp(t, clock)
	seedList(t, a, clock)
	body := a.get(t, "/ui/?status=stale").Body.String()
	row := regexp.MustCompile(`(?s)<tr class="feature-row" data-key="([^"]+)"[^>]*?( hidden)?>.*?</tr>`)
	chip := regexp.MustCompile(`<span class="chip [a-z]+" title="[^"]*">([^<]+)</span>`)
	got := map[string]string{}
	var shown []string
	for _, m := range row.FindAllStringSubmatch(body, -1) {
		var chips []string
		for _, c := range chip.FindAllStringSubmatch(m[0], -1) {
			chips = append(chips, html.UnescapeString(c[1]))
		}
		got[m[1]] = strings.Join(chips, " + ")
		if m[2] == "" {
			shown = append(shown, m[1])
		}
	}
	for key, want := range map[string]string{
		"feat-07": "Split", "pay-dormant": "Dormant + Stale", "pay-full": "100 % + Stale", "pay-off": "Off",
		"pay-quiet": "Split + Stale", "pay-ramp": "Ramping → 10 % in 3 h",
	} {
		if got[key] != want {
			t.Errorf("chips of %s = %q, want %q", key, got[key], want)
		}
	}
	if len(got) != 50 {
		t.Errorf("the list has %d rows, want 50", len(got))
	}
	slices.Sort(shown)
	if !slices.Equal(shown, []string{"pay-dormant", "pay-full", "pay-quiet"}) {
		t.Errorf("?status=stale shows %v, want pay-dormant, pay-full, pay-quiet", shown)
	}
	if !strings.Contains(body, `<option value="stale" selected>Stale</option>`) {
		t.Error("the status filter does not show stale as picked")
	}
	body = a.get(t, "/ui/?tag=team-b&owner=alice@example.com&sort=name").Body.String()
	shown = shown[:0]
	for _, m := range row.FindAllStringSubmatch(body, -1) {
		if m[2] == "" {
			shown = append(shown, m[1])
		}
	}
	if !slices.Equal(shown, []string{"feat-01", "feat-03", "feat-05", "feat-07", "feat-09"}) {
		t.Errorf("team-b and alice by name: %v", shown)
	}

	// An archived feature leaves the list but for the archived filter,
	// which shows it alone, with its chip.
	if _, err := a.svc.Archive(context.Background(), "feat-03", rollout.ChangeOptions{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	visible := func(path string) []string {
		var keys []string
		for _, m := range row.FindAllStringSubmatch(a.get(t, path).Body.String(), -1) {
			if m[2] == "" {
				keys = append(keys, m[1])
			}
		}
		return keys
	}
	if keys := visible("/ui/?tag=team-b&owner=alice@example.com&sort=name"); !slices.Equal(keys, []string{"feat-01", "feat-05", "feat-07", "feat-09"}) {
		t.Errorf("after archiving feat-03, team-b and alice by name: %v", keys)
	}
	if keys := visible("/ui/?status=archived"); !slices.Equal(keys, []string{"feat-03"}) {
		t.Errorf("?status=archived shows %v, want feat-03 alone", keys)
	}
	body = a.get(t, "/ui/?status=archived").Body.String()
	if m := regexp.MustCompile(`(?s)data-key="feat-03".*?</tr>`).FindString(body); !strings.Contains(m, ">Archived</span>") {
		t.Errorf("feat-03's row under ?status=archived has no Archived chip: %s", m)
	}
}
