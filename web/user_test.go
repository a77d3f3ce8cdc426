package web_test

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
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
