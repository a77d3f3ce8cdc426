package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// listIDs returns n user IDs "prefix-0", "prefix-1", ….
func listIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// TestUserListAPI: a user list is created, replaced and edited over
// HTTP; it shows its size, never its IDs; a feature's rule matches its
// users by in_segment; each change (dry runs aside) is a new version of
// the feature using it, whose report counts the users that enter and
// leave the list, as the answer does; duplicate IDs count once.
func TestUserListAPI(t *testing.T) {
	s := newRulesServer(t)
	created := s.must(http.StatusCreated, "POST", "/api/segments", map[string]any{"key": "beta", "description": "testers", "users": []string{"ann", "bob", "bob", "carol"}}).json(t)
	if seg := created["segment"].(map[string]any); seg["list"] != true || seg["size"].(float64) != 3 || created["users"].(map[string]any)["added"].(float64) != 3 {
		t.Fatalf("POST a list = %v, want a list of size 3, 3 added", created)
	}
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", `{"rules":[{"name":"beta","conditions":[{"op":"in_segment","value":"beta"}],"serve":{"bucket":"on"}}]}`)
	got := s.must(http.StatusOK, "GET", "/api/segments/beta", nil)
	if strings.Contains(string(got.body), "carol") || got.json(t)["size"].(float64) != 3 || got.json(t)["features"].([]any)[0] != "checkout" {
		t.Errorf("GET /api/segments/beta = %s, want its size, its feature and no IDs", got.body)
	}
	served := func(user string) string {
		t.Helper()
		e := s.must(http.StatusOK, "GET", "/evaluate?feature=checkout&user="+user, nil).json(t)
		return fmt.Sprint(e["reason"], " ", e["rule"])
	}
	if got := served("bob"); got != "targeting_match beta" {
		t.Errorf("bob, listed: %s", got)
	}
	if got := served("dave"); got == "targeting_match beta" {
		t.Errorf("dave, not listed: %s", got)
	}

	// An edit's dry run says what it would do, and does nothing.
	dry := s.must(http.StatusOK, "POST", "/api/segments/beta/users?dry_run=true", map[string]any{"add": []string{"dave", "ann"}, "remove": []string{"bob", "zed"}}).json(t)
	if u := dry["users"].(map[string]any); u["added"].(float64) != 1 || u["removed"].(float64) != 1 || u["size"].(float64) != 3 || dry["features"].([]any)[0] != "checkout" {
		t.Errorf("dry run of +dave +ann -bob -zed = %v, want 1 added, 1 removed, size 3, checkout changed", dry)
	}
	if got := served("dave"); got == "targeting_match beta" {
		t.Errorf("after a dry run dave is served %s", got)
	}
	fv := s.must(http.StatusOK, "GET", "/api/features/checkout", nil).json(t)["version"].(float64)
	s.must(http.StatusOK, "POST", "/api/segments/beta/users", map[string]any{"add": []string{"dave", "ann"}, "remove": []string{"bob", "zed"}})
	if served("dave") != "targeting_match beta" || served("bob") == "targeting_match beta" {
		t.Errorf("after +dave -bob: dave %s, bob %s", served("dave"), served("bob"))
	}
	f := s.must(http.StatusOK, "GET", "/api/features/checkout/versions?limit=1", nil).json(t)["versions"].([]any)[0].(map[string]any)
	rules := f["report"].(map[string]any)["rules"].([]any)[0].(map[string]any)
	if f["version"].(float64) != fv+1 || rules["added"].(float64) != 1 || rules["removed"].(float64) != 1 {
		t.Errorf("the feature's version after the edit: %v, want version %v whose report says 1 added, 1 removed", f, fv+1)
	}

	// PUT replaces every user.
	res := s.must(http.StatusOK, "PUT", "/api/segments/beta", map[string]any{"description": "new testers", "users": []string{"erin", "frank", "dave"}}).json(t)
	if u := res["users"].(map[string]any); u["added"].(float64) != 2 || u["removed"].(float64) != 2 || u["size"].(float64) != 3 {
		t.Errorf("PUT erin, frank, dave over ann, carol, dave = %v, want 2 added, 2 removed", u)
	}
	for user, want := range map[string]bool{"erin": true, "dave": true, "ann": false, "carol": false} {
		if got := served(user) == "targeting_match beta"; got != want {
			t.Errorf("after PUT, %s listed: %v, want %v", user, got, want)
		}
	}
	vs := s.must(http.StatusOK, "GET", "/api/segments/beta/versions", nil).json(t)["versions"].([]any)
	if len(vs) != 3 || !strings.Contains(vs[0].(map[string]any)["summary"].(string), "2 added, 2 removed") {
		t.Errorf("the list's history: %v", vs)
	}
	if users := s.svc.Snapshot().CompiledSegments()["beta"].Users(); users.Len() != 3 {
		t.Errorf("the snapshot's list holds %d users, want 3", users.Len())
	}
}

// TestUserListAbuse: what a user list refuses is a clear 4xx JSON error
// that changes nothing: too many users, an ID too long, a body past the
// routes' limit, conditions and users together, a user added and removed
// at once, an edit that would pass the limit, users for a segment of
// conditions and conditions for a list.
func TestUserListAbuse(t *testing.T) {
	s := newRulesServer(t)
	s.must(http.StatusCreated, "POST", "/api/segments", map[string]any{"key": "beta", "users": listIDs("u", 10)})
	s.must(http.StatusCreated, "POST", "/api/segments", map[string]any{"key": "staff", "conditions": []any{}})
	tooMany := listIDs("u", feature.MaxListUsers+1)
	long := strings.Repeat("x", feature.MaxUserBytes+1)
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		want               string // in the error
	}{
		{"100,001 users", "POST", "/api/segments", map[string]any{"key": "big", "users": tooMany}, 422, "at most 100000"},
		{"100,001 users replacing", "PUT", "/api/segments/beta", map[string]any{"users": tooMany}, 422, "at most 100000"},
		{"an ID too long", "POST", "/api/segments/beta/users", map[string]any{"add": []string{"ok", long}}, 422, "add[1]"},
		{"an empty ID", "PUT", "/api/segments/beta", map[string]any{"users": []string{""}}, 422, "users[0]"},
		{"a body past the limit", "PUT", "/api/segments/beta", `{"users":["` + strings.Repeat("y", api.MaxListBodyBytes) + `"]}`, 413, "larger than"},
		{"conditions and users", "POST", "/api/segments", map[string]any{"key": "both", "users": []string{"a"}, "conditions": []any{}}, 400, "not both"},
		{"added and removed", "POST", "/api/segments/beta/users", map[string]any{"add": []string{"a"}, "remove": []string{"a"}}, 422, "both added and removed"},
		{"an edit of nothing", "POST", "/api/segments/beta/users", map[string]any{}, 400, "add or remove"},
		{"an edit past 100,000", "POST", "/api/segments/beta/users", map[string]any{"add": listIDs("v", feature.MaxListUsers-9)}, 422, "would hold 100001 users"},
		{"users for conditions", "PUT", "/api/segments/staff", map[string]any{"users": []string{"a"}}, 422, "not a user list"},
		{"conditions for a list", "PUT", "/api/segments/beta", map[string]any{"conditions": []any{}}, 422, "is a user list"},
		{"a list of no segment", "POST", "/api/segments/nope/users", map[string]any{"add": []string{"a"}}, 404, "does not exist"},
		{"an unknown field", "POST", "/api/segments/beta/users", map[string]any{"add": []string{"a"}, "users": []string{"b"}}, 400, "users"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do(tc.method, tc.path, tc.body)
			var e struct {
				Error struct{ Code, Message, Field string }
			}
			if err := json.Unmarshal(r.body, &e); err != nil || r.status != tc.status || !strings.Contains(e.Error.Message+" "+e.Error.Field, tc.want) {
				t.Errorf("%s %s = %d %.300s, want %d with an error saying %q", tc.method, tc.path, r.status, r.body, tc.status, tc.want)
			}
		})
	}
	if _, ok := s.svc.Snapshot().Segment("big"); ok {
		t.Error("a refused list was created")
	}
	if seg, _ := s.svc.Snapshot().Segment("beta"); seg.Version != 1 || seg.Size != 10 {
		t.Errorf("after refused changes beta is %+v, want version 1 of 10 users", seg)
	}
}

// TestUserListBiggest: a list of 100,000 IDs of 36 bytes (UUIDs) goes in
// one request, and one edit of it writes its difference.
func TestUserListBiggest(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100,000 users")
	}
	s := newRulesServer(t)
	users := make([]string, feature.MaxListUsers)
	for i := range users {
		users[i] = fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
	}
	s.must(http.StatusCreated, "POST", "/api/segments", map[string]any{"key": "all", "users": users})
	res := s.must(http.StatusOK, "POST", "/api/segments/all/users", map[string]any{"remove": users[:5], "add": []string{"newcomer"}}).json(t)
	if u := res["users"].(map[string]any); u["added"].(float64) != 1 || u["removed"].(float64) != 5 || u["size"].(float64) != feature.MaxListUsers-4 {
		t.Errorf("edit of the biggest list = %v", u)
	}
	if l := s.svc.Snapshot().CompiledSegments()["all"].Users(); l.Len() != feature.MaxListUsers-4 || !l.Has("newcomer") || l.Has(users[0]) || !l.Has(users[99_999]) {
		t.Errorf("the snapshot's list: %d users", l.Len())
	}
}

// TestUserListLimits: viewers and apps' tokens cannot change a list; a
// token uploads one list at a time and the server two in all (429 with a
// Retry-After past them); and a token's uploads are rate limited.
func TestUserListLimits(t *testing.T) {
	g := newGuardedServer(t)
	g.must(t, http.StatusCreated, "admin", "POST", "/api/segments", map[string]any{"key": "beta", "users": []string{"a"}})
	for _, role := range []string{"viewer", "sdk", "client"} {
		for _, r := range []struct{ method, path string }{{"POST", "/api/segments/beta/users"}, {"PUT", "/api/segments/beta"}} {
			if status, body := g.send(t, role, r.method, r.path, map[string]any{"add": []string{"x"}, "users": []string{"x"}}); status != http.StatusForbidden {
				t.Errorf("%s %s as %s = %d %s, want 403", r.method, r.path, role, status, body)
			}
		}
	}
	_, other, err := g.tokens.Create(t.Context(), "editor-2", auth.RoleEditor, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	g.secrets["editor-2"] = other

	entered, release := make(chan struct{}, 8), make(chan struct{})
	api.SetListHook(t, func() { entered <- struct{}{}; <-release })
	var wg sync.WaitGroup
	statuses := make(chan int, 2)
	for _, role := range []string{"editor", "admin"} {
		wg.Go(func() {
			status, _ := g.send(t, role, "POST", "/api/segments/beta/users", map[string]any{"add": []string{"from-" + role}})
			statuses <- status
		})
		<-entered
	}
	for _, tc := range []struct{ role, want string }{{"editor", "at a time"}, {"editor-2", "at once"}} {
		status, body := g.send(t, tc.role, "POST", "/api/segments/beta/users", map[string]any{"add": []string{"c"}})
		if status != http.StatusTooManyRequests || !strings.Contains(body, tc.want) {
			t.Errorf("a third upload, as %s, while two run = %d %s, want 429 saying %q", tc.role, status, body, tc.want)
		}
	}
	close(release)
	wg.Wait()
	close(statuses)
	for status := range statuses {
		if status != http.StatusOK {
			t.Errorf("an upload that held a slot = %d, want 200", status)
		}
	}
	api.SetListHook(t, nil)

	// The rate: a burst, then about two a second; refused requests
	// change nothing.
	limited := 0
	for range 60 {
		if status, _ := g.send(t, "editor-2", "POST", "/api/segments/beta/users", map[string]any{"add": []string{"x"}, "dry_run": true}); status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Error("60 uploads from one token in a row were never refused with 429")
	}
	if status, body := g.send(t, "admin", "POST", "/api/segments/beta/users?dry_run=true", map[string]any{"add": []string{"x"}}); status != http.StatusOK {
		t.Errorf("another token's upload while editor-2 is limited = %d %s, want 200", status, body)
	}
}
