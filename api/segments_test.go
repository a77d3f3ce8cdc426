package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

func TestSegmentsAPI(t *testing.T) {
	s := newRulesServer(t)
	// A rule cannot use a segment that does not exist.
	useStaff := `{"rules":[{"name":"staff","conditions":[{"op":"in_segment","value":"staff"}],"serve":{"bucket":"on"}}]}`
	if r := s.do("PUT", "/api/features/checkout/rules", useStaff); r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "staff") {
		t.Errorf("a rule using no segment = %d %s, want 422 naming it", r.status, r.body)
	}
	created := s.must(http.StatusCreated, "POST", "/api/segments",
		`{"key":"staff","description":"our people","conditions":[{"attribute":"email","op":"ends_with","value":"@example.com"}]}`)
	if created.header.Get("ETag") != `"segment-1"` {
		t.Errorf("ETag %q", created.header.Get("ETag"))
	}
	s.must(http.StatusConflict, "POST", "/api/segments", `{"key":"staff","conditions":[]}`)
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", useStaff)

	seg := s.must(http.StatusOK, "GET", "/api/segments/staff", nil).json(t)
	if seg["version"].(float64) != 1 || seg["features"].([]any)[0] != "checkout" || seg["description"] != "our people" {
		t.Errorf("GET segment: %v", seg)
	}
	if list := s.must(http.StatusOK, "GET", "/api/segments", nil).json(t)["segments"].([]any); len(list) != 1 {
		t.Errorf("GET segments: %v", list)
	}
	eval := func(email string) map[string]any {
		return s.must(http.StatusOK, "GET", "/evaluate?feature=checkout&user=u1&ctx.email="+email, nil).json(t)
	}
	if e := eval("ann@example.com"); e["bucket"] != "on" || e["rule"] != "staff" {
		t.Errorf("in segment staff: %v", e)
	}
	if e := eval("ann@example.org"); e["reason"] != "ring" {
		t.Errorf("not in segment staff: %v", e)
	}

	// A change of the segment is a change of the feature.
	fv := s.must(http.StatusOK, "GET", "/api/features/checkout", nil).json(t)["version"].(float64)
	if r := s.do("PUT", "/api/segments/staff", `{"description":"ours","conditions":[{"attribute":"email","op":"ends_with","value":"@example.org"}]}`, "If-Match", `"segment-7"`); r.status != http.StatusPreconditionFailed {
		t.Errorf("PUT with a stale If-Match = %d %s, want 412", r.status, r.body)
	}
	res := s.must(http.StatusOK, "PUT", "/api/segments/staff", `{"description":"ours","conditions":[{"attribute":"email","op":"ends_with","value":"@example.org"}]}`, "If-Match", `"segment-1"`).json(t)
	if res["segment"].(map[string]any)["version"].(float64) != 2 || res["features"].([]any)[0] != "checkout" {
		t.Errorf("PUT segment: %v", res)
	}
	if e := eval("ann@example.org"); e["bucket"] != "on" {
		t.Errorf("after the change, in segment staff: %v", e)
	}
	f := s.must(http.StatusOK, "GET", "/api/features/checkout", nil).json(t)
	if f["version"].(float64) != fv+1 {
		t.Errorf("the feature is at version %v after the segment's change, want %v", f["version"], fv+1)
	}
	vs := s.must(http.StatusOK, "GET", "/api/features/checkout/versions", nil).json(t)["versions"].([]any)
	if sum := vs[0].(map[string]any)["summary"].(string); !strings.HasPrefix(sum, "segment staff changed: ") {
		t.Errorf("the feature's newest version: %q", sum)
	}
	svs := s.must(http.StatusOK, "GET", "/api/segments/staff/versions", nil).json(t)["versions"].([]any)
	if len(svs) != 2 || svs[0].(map[string]any)["version"].(float64) != 2 {
		t.Errorf("segment versions: %v", svs)
	}
	s.must(http.StatusNotFound, "GET", "/api/segments/nobody/versions", nil)
	s.must(http.StatusNotFound, "PUT", "/api/segments/nobody", `{"conditions":[]}`)

	// In use: not deleted.
	r := s.do("DELETE", "/api/segments/staff", nil)
	if r.status != http.StatusConflict || !strings.Contains(string(r.body), "checkout") {
		t.Errorf("DELETE in use = %d %s, want 409 naming checkout", r.status, r.body)
	}
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", `{"rules":[]}`)
	s.must(http.StatusOK, "DELETE", "/api/segments/staff?dry_run=true", nil)
	s.must(http.StatusNoContent, "DELETE", "/api/segments/staff", nil)
	s.must(http.StatusNotFound, "GET", "/api/segments/staff", nil)
}

func TestSegmentsAbuse(t *testing.T) {
	s := newRulesServer(t)
	s.must(http.StatusCreated, "POST", "/api/segments", `{"key":"beta","conditions":[{"attribute":"user","op":"in","value":["a","b"]}]}`)
	many := strings.Repeat(`{"attribute":"a","op":"eq","value":"x"},`, 10_000)
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	// What the request could not say is a 400; what the domain refuses of
	// a segment, a 422.
	for name, tc := range map[string]struct {
		body string
		want int
	}{
		"segment in segment": {`{"key":"loop","conditions":[{"op":"in_segment","value":"beta"}]}`, 422},
		"10,000 conditions":  {`{"key":"many","conditions":[` + many[:len(many)-1] + `]}`, 422},
		"invalid regexp":     {`{"key":"re","conditions":[{"attribute":"a","op":"matches","value":"[z-a]"}]}`, 422},
		"unknown operator":   {`{"key":"op","conditions":[{"attribute":"a","op":"near","value":"x"}]}`, 422},
		"deep JSON":          {`{"key":"deep","conditions":[{"attribute":"a","op":"eq","value":` + deep + `}]}`, 400},
		"bad key":            {`{"key":"Not A Key","conditions":[]}`, 422},
		"no conditions":      {`{"key":"none"}`, 400},
		"max_churn":          {`{"key":"mc","conditions":[],"max_churn":0.1}`, 400},
	} {
		if r := s.do("POST", "/api/segments", tc.body); r.status != tc.want {
			t.Errorf("POST %s = %d %.200s, want %d", name, r.status, r.body, tc.want)
		}
		if name == "bad key" {
			continue
		}
		if r := s.do("PUT", "/api/segments/beta", strings.Replace(tc.body, `"key"`, `"description"`, 1)); r.status != tc.want {
			t.Errorf("PUT %s = %d %.200s, want %d", name, r.status, r.body, tc.want)
		}
	}
	if got := s.svc.Snapshot().Segments(); len(got) != 1 || got[0].Version != 1 {
		t.Errorf("after refused changes: %v", got)
	}
}

// TestSegmentFollowed: another instance over the same database follows a
// segment's change through the change feed, and serves what the first
// serves.
func TestSegmentFollowed(t *testing.T) {
	s := newRulesServer(t)
	s.must(http.StatusCreated, "POST", "/api/segments", `{"key":"staff","conditions":[{"attribute":"email","op":"ends_with","value":"@example.com"}]}`)
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", `{"rules":[{"name":"staff","conditions":[{"op":"in_segment","value":"staff"}],"serve":{"bucket":"on"}}]}`)
	db, err := sqlite.Open(context.Background(), s.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	other, err := rollout.NewService(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := feature.Context{"email": "ann@example.org"}
	if e, _ := other.Snapshot().PeekContext("checkout", "u", ctx); e.Reason != feature.ReasonRing {
		t.Fatalf("before: %+v", e)
	}
	s.must(http.StatusOK, "PUT", "/api/segments/staff", `{"conditions":[{"attribute":"email","op":"ends_with","value":"@example.org"}]}`)
	if _, err := other.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e, _ := other.Snapshot().PeekContext("checkout", "u", ctx); e.Bucket != "on" || e.Rule != "staff" {
		t.Errorf("after the segment's change, the other instance serves %+v", e)
	}
	if seg, ok := other.Snapshot().Segment("staff"); !ok || seg.Version != 2 {
		t.Errorf("the other instance's segment: %+v", seg)
	}
	_ = api.Options{}
}

// TestSegmentIdempotency: a change of a segment retried with its
// Idempotency-Key is answered as the first time, not made twice.
func TestSegmentIdempotency(t *testing.T) {
	s := newRulesServer(t)
	body := `{"key":"staff","conditions":[{"attribute":"email","op":"ends_with","value":"@example.com"}]}`
	first := s.must(http.StatusCreated, "POST", "/api/segments", body, "Idempotency-Key", "seg-1")
	again := s.must(http.StatusCreated, "POST", "/api/segments", body, "Idempotency-Key", "seg-1")
	if string(first.body) != string(again.body) || again.header.Get("ETag") != `"segment-1"` {
		t.Errorf("retried create: %s %v, first %s", again.body, again.header, first.body)
	}
	put := `{"conditions":[{"attribute":"email","op":"ends_with","value":"@example.org"}]}`
	s.must(http.StatusOK, "PUT", "/api/segments/staff", put, "Idempotency-Key", "seg-2")
	s.must(http.StatusOK, "PUT", "/api/segments/staff", put, "Idempotency-Key", "seg-2")
	if seg, _ := s.svc.Snapshot().Segment("staff"); seg.Version != 2 {
		t.Errorf("after a retried change the segment is at version %d, want 2", seg.Version)
	}
	s.must(http.StatusNoContent, "DELETE", "/api/segments/staff", nil, "Idempotency-Key", "seg-3")
	s.must(http.StatusNoContent, "DELETE", "/api/segments/staff", nil, "Idempotency-Key", "seg-3")
}

// TestCreateWithUnknownSegment: a feature created with rules that use no
// segment is refused with 422, and not created.
func TestCreateWithUnknownSegment(t *testing.T) {
	s := newRulesServer(t)
	r := s.do("POST", "/api/features", `{"key":"x","buckets":[{"name":"on"}],"rules":[{"name":"r","conditions":[{"op":"in_segment","value":"ghost"}],"serve":{"bucket":"on"}}]}`)
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "ghost") {
		t.Errorf("create with an unknown segment = %d %s, want 422 naming it", r.status, r.body)
	}
	s.must(http.StatusNotFound, "GET", "/api/features/x", nil)
	s.must(http.StatusCreated, "POST", "/api/features", `{"key":"x","bucket_by":"org","buckets":[{"name":"on"}],"rules":[{"name":"r","conditions":[{"attribute":"plan","op":"eq","value":"pro"}],"serve":{"ring":true}}]}`)
	if f := s.must(http.StatusOK, "GET", "/api/features/x", nil).json(t); f["bucket_by"] != "org" || len(f["rules"].([]any)) != 1 {
		t.Errorf("created with rules: %v", f)
	}
}
