package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/feature"
)

func newPrereqServer(t *testing.T) *testServer {
	s := newServer(t, "", api.Options{})
	s.create(feature.Feature{Key: "new-api", Enabled: true, Salt: "new-api",
		Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}})
	s.create(feature.Feature{Key: "new-ui", Enabled: true, Salt: "new-ui", Fallback: "off",
		Buckets: []feature.Bucket{{Name: "off", Replicas: 0}, {Name: "on", Replicas: 100}}})
	return s
}

const contractPrerequisites = `{"prerequisites":[{"feature":"new-api","buckets":["on"]}]}`

// TestPrerequisitesAPI: PUT /api/features/K/prerequisites is a change like
// any other — a dry run changes nothing, If-Match guards it, it makes a
// version with a summary and an audit event — and every evaluation path
// serves the fallback, reason prerequisite_failed (OFREP DEFAULT naming
// it), to users the prerequisite does not serve on, and counts each of
// those evaluations among the dependant's exposures.
func TestPrerequisitesAPI(t *testing.T) {
	s := newPrereqServer(t)
	got := s.must(http.StatusOK, "GET", "/api/features/new-ui", nil)
	etag := got.header.Get("ETag")
	dry := s.must(http.StatusOK, "PUT", "/api/features/new-ui/prerequisites?dry_run=true", contractPrerequisites).json(t)
	if dry["dry_run"] != true {
		t.Errorf("dry run: %v", dry)
	}
	if f, _ := s.svc.Snapshot().Feature("new-ui"); f.Version != 1 || len(f.Prerequisites) != 0 {
		t.Fatalf("after a dry run: version %d, prerequisites %v", f.Version, f.Prerequisites)
	}
	res := s.must(http.StatusOK, "PUT", "/api/features/new-ui/prerequisites", contractPrerequisites, "If-Match", etag).json(t)
	if f := res["feature"].(map[string]any); f["version"].(float64) != 2 || len(f["prerequisites"].([]any)) != 1 {
		t.Fatalf("after PUT: %v", f)
	}
	if r := s.do("PUT", "/api/features/new-ui/prerequisites", `{"prerequisites":[]}`, "If-Match", etag); r.status != http.StatusPreconditionFailed {
		t.Errorf("a stale If-Match = %d %s, want 412", r.status, r.body)
	}
	vs := s.must(http.StatusOK, "GET", "/api/features/new-ui/versions", nil).json(t)
	if summary := vs["versions"].([]any)[0].(map[string]any)["summary"]; summary != "set prerequisites: new-api serves on" {
		t.Errorf("summary %q", summary)
	}
	audit := s.must(http.StatusOK, "GET", "/api/audit?feature=new-ui", nil)
	if !strings.Contains(string(audit.body), "set prerequisites: new-api serves on") {
		t.Errorf("the audit trail lacks the change: %s", audit.body)
	}

	// The three paths agree with the service, and name the prerequisite.
	failed := 0
	for i := range 60 {
		user := fmt.Sprintf("u%d", i)
		want := s.evaluate("new-ui", user)
		api, _ := s.svc.Snapshot().Peek("new-api", user)
		g := s.must(http.StatusOK, "GET", "/evaluate?feature=new-ui&user="+user, nil).json(t)
		p := s.must(http.StatusOK, "POST", "/evaluate", fmt.Sprintf(`{"user":%q,"features":["new-ui"]}`, user)).json(t)["results"].(map[string]any)["new-ui"].(map[string]any)
		o := s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/new-ui", ofrepBody(user)).json(t)
		if api.Bucket == "on" {
			if g["bucket"] != "on" || p["bucket"] != "on" || o["variant"] != "on" || want.Bucket != "on" {
				t.Fatalf("%s passes new-api: GET %v, POST %v, OFREP %v", user, g, p, o)
			}
			continue
		}
		failed++
		for _, e := range []map[string]any{g, p} {
			if e["bucket"] != "off" || e["reason"] != feature.ReasonPrerequisiteFailed || e["prerequisite"] != "new-api" {
				t.Fatalf("%s fails new-api: %v", user, e)
			}
		}
		if o["variant"] != "off" || o["reason"] != "DEFAULT" || o["metadata"].(map[string]any)["prerequisite"] != "new-api" {
			t.Fatalf("%s fails new-api: OFREP %v", user, o)
		}
	}
	if failed == 0 {
		t.Fatal("no user failed the prerequisite")
	}
	// 60 users × 4 evaluations (the service's own, GET, POST, OFREP), all
	// of them counted as the dependant's; the prerequisite's tests are not.
	var counted int64
	for _, e := range s.svc.Snapshot().Compiled("new-ui").Counts(nil) {
		counted += e.Count
	}
	if counted != 240 {
		t.Errorf("new-ui counted %d evaluations, want 240", counted)
	}
	if n := s.svc.Snapshot().Compiled("new-api").Counts(nil); len(n) != 0 {
		t.Errorf("new-api counted %v", n)
	}
}

// TestPrerequisitesAbuse: loops, a chain of 6 links and unknown features
// are 400 naming the fault; 1,000 prerequisites are 422 (at most 10);
// none of them changes anything. Archiving a feature others require is
// 409 naming them.
func TestPrerequisitesAbuse(t *testing.T) {
	s := newPrereqServer(t)
	two := offOnBuckets()
	for i := range 7 {
		s.create(feature.Feature{Key: fmt.Sprintf("c%d", i), Enabled: true, Buckets: two})
	}
	for i := 1; i <= 5; i++ { // c1 requires c0, …, c5 requires c4: 5 links
		s.must(http.StatusOK, "PUT", fmt.Sprintf("/api/features/c%d/prerequisites", i), fmt.Sprintf(`{"prerequisites":[{"feature":"c%d","buckets":["on"]}]}`, i-1))
	}
	refused := func(path, body string, status int, says string) {
		t.Helper()
		before := s.svc.Snapshot().Revision()
		r := s.do("PUT", path, body)
		if r.status != status || !strings.Contains(string(r.body), says) {
			t.Errorf("PUT %s %.80s = %d %s, want %d saying %q", path, body, r.status, r.body, status, says)
		}
		if after := s.svc.Snapshot().Revision(); after != before {
			t.Errorf("a refused change moved the revision from %d to %d", before, after)
		}
	}
	refused("/api/features/c6/prerequisites", `{"prerequisites":[{"feature":"c5","buckets":["on"]}]}`, http.StatusBadRequest, "6 links long")
	refused("/api/features/c0/prerequisites", `{"prerequisites":[{"feature":"c3","buckets":["on"]}]}`, http.StatusBadRequest, "loop")
	refused("/api/features/new-ui/prerequisites", `{"prerequisites":[{"feature":"nope","buckets":["on"]}]}`, http.StatusBadRequest, `\"nope\" does not exist`)
	refused("/api/features/new-ui/prerequisites", `{"prerequisites":[{"feature":"new-api","buckets":["blue"]}]}`, http.StatusBadRequest, `no bucket \"blue\"`)
	refused("/api/features/new-ui/prerequisites", `{"prerequisites":[{"feature":"new-ui","buckets":["on"]}]}`, http.StatusUnprocessableEntity, "cannot require itself")
	refused("/api/features/new-ui/prerequisites", `{}`, http.StatusBadRequest, "give the prerequisites")
	var many []string
	for i := range 1000 {
		many = append(many, fmt.Sprintf(`{"feature":"f%d","buckets":["on"]}`, i))
	}
	refused("/api/features/new-ui/prerequisites", `{"prerequisites":[`+strings.Join(many, ",")+`]}`, http.StatusUnprocessableEntity, "at most 10 prerequisites")
	// Archive: 409 naming the dependants, in the route's two forms.
	for _, r := range []response{s.do("POST", "/api/features/c2/archive", nil), s.do("DELETE", "/api/features/c2", nil)} {
		if r.status != http.StatusConflict || !strings.Contains(string(r.body), "prerequisite of c3") {
			t.Errorf("archive a required feature = %d %s, want 409 naming c3", r.status, r.body)
		}
	}
	// Removing a bucket a dependant requires is refused too.
	refusedBuckets := s.do("DELETE", "/api/features/c2/buckets/on", nil)
	if refusedBuckets.status != http.StatusBadRequest || !strings.Contains(string(refusedBuckets.body), "c3 requires bucket on") {
		t.Errorf("remove a required bucket = %d %s", refusedBuckets.status, refusedBuckets.body)
	}
	// The last link gone, c5 archives.
	s.must(http.StatusOK, "PUT", "/api/features/c5/prerequisites", `{"prerequisites":[]}`)
	s.must(http.StatusOK, "POST", "/api/features/c5/archive", nil)
}

// TestPrerequisiteChangePreview: the preview of a prerequisite's change
// lists the dependants whose answers it changes, with the share of users
// whose result flips, reckoned exactly on its ring, and those through
// chains.
func TestPrerequisiteChangePreview(t *testing.T) {
	s := newPrereqServer(t)
	s.must(http.StatusOK, "PUT", "/api/features/new-ui/prerequisites", contractPrerequisites)
	s.create(feature.Feature{Key: "top", Enabled: true, Buckets: offOnBuckets()})
	s.must(http.StatusOK, "PUT", "/api/features/top/prerequisites", `{"prerequisites":[{"feature":"new-ui","buckets":["on"]}]}`)
	rep := s.must(http.StatusOK, "POST", "/api/features/new-api/preview", `{"buckets":[{"name":"off","replicas":100},{"name":"on","replicas":300}]}`).json(t)
	deps, _ := rep["dependants"].([]any)
	if len(deps) != 2 {
		t.Fatalf("dependants: %v", rep["dependants"])
	}
	d := deps[0].(map[string]any)
	shares := s.svc.Snapshot().Compiled("new-api").Shares()
	cc := feature.Compile(feature.Feature{Key: "new-api", Enabled: true, Salt: "new-api", Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 300}}}, nil)
	want := cc.Shares()["on"] - shares["on"]
	if d["feature"] != "new-ui" || d["exact"] != true || fmt.Sprintf("%.9f", d["share"]) != fmt.Sprintf("%.9f", want) {
		t.Errorf("new-ui: %v, want share %v exact", d, want)
	}
	if d2 := deps[1].(map[string]any); d2["feature"] != "top" || d2["through"] != "new-ui" {
		t.Errorf("through a chain: %v", d2)
	}
	// A change that flips no one lists no dependant.
	rep = s.must(http.StatusOK, "PATCH", "/api/features/new-api?dry_run=true", `{"description":"x"}`).json(t)
	if r := rep["report"].(map[string]any); r["dependants"] != nil {
		t.Errorf("a description's change: dependants %v", r["dependants"])
	}
}

// TestExplainAPI: POST /evaluate with "explain":true explains each answer
// (rules, conditions and why, prerequisites, ring) and serves it as
// without; explain on 1,000 features, or all of them unlisted, is 422
// with a clear message.
func TestExplainAPI(t *testing.T) {
	s := newPrereqServer(t)
	s.must(http.StatusOK, "PUT", "/api/features/new-ui/prerequisites", contractPrerequisites)
	s.must(http.StatusOK, "PUT", "/api/features/new-api/rules", `{"rules":[
	 {"name":"new-app","conditions":[{"attribute":"app_version","op":"semver_gte","value":"4.2.0"}],"serve":{"bucket":"on"}},
	 {"name":"staff","conditions":[{"attribute":"email","op":"eq","value":"ann@example.com"}],"serve":{"bucket":"on"}},
	 {"name":"paid","conditions":[{"attribute":"plan","op":"eq","value":"pro"}],"serve":{"bucket":"on"}}]}`)
	body := `{"user":"u1","context":{"app_version":4.3,"email":"Ann@Example.com"},"features":["new-api","new-ui"],"explain":true}`
	res := s.must(http.StatusOK, "POST", "/evaluate", body).json(t)["results"].(map[string]any)
	x := res["new-api"].(map[string]any)["explain"].(map[string]any)
	var whys []string
	for _, r := range x["rules"].([]any) {
		for _, c := range r.(map[string]any)["conditions"].([]any) {
			whys = append(whys, c.(map[string]any)["why"].(string))
		}
	}
	want := []string{"app_version: 4.3 is a number, semver_gte needs a string", "email: case differs", "plan: attribute absent"}
	if strings.Join(whys, "|") != strings.Join(want, "|") {
		t.Errorf("whys %q, want %q", whys, want)
	}
	if x["ring"] == nil {
		t.Errorf("no rule matched, yet no ring: %v", x)
	}
	ui := res["new-ui"].(map[string]any)
	ps := ui["explain"].(map[string]any)["prerequisites"].([]any)
	if len(ps) != 1 || ps[0].(map[string]any)["feature"] != "new-api" || ps[0].(map[string]any)["passed"] != (ui["reason"] != feature.ReasonPrerequisiteFailed) {
		t.Errorf("new-ui explained: %v", ui)
	}
	var many []string
	for i := range 1000 {
		many = append(many, fmt.Sprintf("%q", fmt.Sprintf("f%d", i)))
	}
	for _, b := range []string{
		`{"user":"u1","features":[` + strings.Join(many, ",") + `],"explain":true}`,
		`{"user":"u1","explain":true}`,
	} {
		r := s.do("POST", "/evaluate", b)
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "explain") {
			t.Errorf("explain %.60s… = %d %s, want 422 about explain", b, r.status, r.body)
		}
	}
	var e struct {
		Results map[string]json.RawMessage `json:"results"`
	}
	json.Unmarshal(s.must(http.StatusOK, "POST", "/evaluate", `{"user":"u1","features":["new-api"]}`).body, &e)
	if strings.Contains(string(e.Results["new-api"]), "explain") {
		t.Errorf("an answer without explain explains: %s", e.Results["new-api"])
	}
}

func offOnBuckets() []feature.Bucket {
	return []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}
}
