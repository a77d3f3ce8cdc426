package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/api/evaluation"
	"github.com/rollout/rollout/rollout/feature"
)

// TestUnreadableValuesRefused sends bucket values that json.Valid accepts
// but strict clients cannot read through every endpoint that stores one:
// each is a 422 that changes nothing, and the OFREP bulk answer still
// decodes with encoding/json.
func TestUnreadableValuesRefused(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	values := map[string]string{
		"invalid UTF-8":       "\"caf\xe9\"",
		"beyond float64":      `1e999999`,
		"nested beyond":       `{"limits":[1,-2e400]}`,
		"lone surrogate":      `"\ud800"`,
		"invalid UTF-8 inkey": "{\"\xff\":true}",
	}
	before := s.must(200, "GET", "/api/features", nil).body
	for name, v := range values {
		for _, req := range []struct{ method, path, body string }{
			{"POST", "/api/features", `{"key":"fresh","buckets":[{"name":"A","value":` + v + `}]}`},
			{"POST", "/api/features/checkout/buckets", `{"name":"D","replicas":3,"value":` + v + `}`},
			{"PUT", "/api/features/checkout/buckets/A", `{"value":` + v + `}`},
			{"POST", "/api/features/checkout/preview", `{"buckets":[{"name":"A","value":` + v + `}]}`},
		} {
			r := s.do(req.method, req.path, req.body)
			if r.status != http.StatusUnprocessableEntity || r.json(t)["error"] == nil {
				t.Errorf("%s: %s %s = %d %s, want 422 with a JSON error", name, req.method, req.path, r.status, r.body)
			}
		}
	}
	if after := s.must(200, "GET", "/api/features", nil).body; string(after) != string(before) {
		t.Errorf("refused values changed the features:\nbefore %s\nafter  %s", before, after)
	}

	// What is accepted is what Go's decoder reads back.
	s.must(200, "PUT", "/api/features/checkout/buckets/A", `{"value":{"max":1.7976931348623157e308,"word":"\ud83d\ude00 café"}}`)
	r := s.must(200, "POST", ofrepFlags, ofrepBody("user-1"))
	var bulk struct {
		Flags []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"flags"`
	}
	if err := json.Unmarshal(r.body, &bulk); err != nil || len(bulk.Flags) != 6 {
		t.Fatalf("the OFREP bulk answer does not decode: %v, %d flags: %s", err, len(bulk.Flags), r.body)
	}
}

// TestUnreadableUserIDs checks that a user ID that is not valid UTF-8 is
// refused by every evaluation endpoint, however it is written, instead of
// being evaluated as the U+FFFD it would decode to.
func TestUnreadableUserIDs(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	for _, user := range []string{"\"\xff\"", "\"ok\xc3\"", `"\ud800"`, `"x\udc00"`, `"\ud83dx"`} {
		for _, req := range []struct {
			method, path, body string
			status             int
			code               string // OFREP's errorCode
		}{
			{"POST", "/evaluate", `{"user":` + user + `}`, 422, ""},
			{"POST", "/evaluate", `{"user":` + user + `,"features":["checkout"]}`, 422, ""},
			{"POST", "/evaluate", `{"features":["checkout"],"USER":` + user + `}`, 422, ""}, // decoded the general way
			{"POST", ofrepFlags + "/checkout", `{"context":{"targetingKey":` + user + `}}`, 400, "INVALID_CONTEXT"},
			{"POST", ofrepFlags, `{"context":{"targetingKey":` + user + `}}`, 400, "INVALID_CONTEXT"},
		} {
			r := s.do(req.method, req.path, req.body)
			body := r.json(t)
			if r.status != req.status || (req.code == "" && body["error"] == nil) || (req.code != "" && body["errorCode"] != req.code) {
				t.Errorf("%s %s %q = %d %s, want %d with a JSON error %s", req.method, req.path, req.body, r.status, r.body, req.status, req.code)
			}
		}
	}
	if r := s.do("GET", "/evaluate?feature=checkout&user=%ff", nil); r.status != 422 {
		t.Errorf("GET /evaluate with user %%ff = %d %s, want 422", r.status, r.body)
	}
	// Valid IDs with escapes, surrogate pairs and U+FFFD itself are users.
	for _, user := range []string{`"\u00e9"`, `"\ud83d\ude00"`, `"\ufffd"`, "\"\uFFFD\"", `"tab\there"`} {
		s.must(200, "POST", "/evaluate", `{"user":`+user+`}`)
		s.must(200, "POST", ofrepFlags, `{"context":{"targetingKey":`+user+`}}`)
	}
}

// TestEvaluateAllPastTheListBound evaluates more features than an explicit
// list may name: without "features", POST /evaluate answers every one.
func TestEvaluateAllPastTheListBound(t *testing.T) {
	s := newServer(t, "", api.Options{})
	n := evaluation.MaxBulkFeatures + 5
	for i := range n {
		s.create(feature.Feature{Key: fmt.Sprintf("f%04d", i), Enabled: true, Buckets: []feature.Bucket{{Name: "A", Replicas: 1}}})
	}
	var all struct {
		Results map[string]struct {
			Bucket *string `json:"bucket"`
			Error  any     `json:"error"`
		} `json:"results"`
	}
	r := s.must(200, "POST", "/evaluate", `{"user":"u"}`)
	if err := json.Unmarshal(r.body, &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Results) != n {
		t.Errorf("POST /evaluate without features answered %d features, want %d", len(all.Results), n)
	}
	for key, res := range all.Results {
		if res.Bucket == nil || *res.Bucket != "A" || res.Error != nil {
			t.Errorf("result for %s = %+v, want bucket A", key, res)
			break
		}
	}
	if r := s.must(200, "POST", "/evaluate?pretty", `{"user":"u"}`); strings.Count(string(r.body), `"bucket": "A"`) != n {
		t.Errorf("POST /evaluate?pretty without features did not answer all %d features", n)
	}
	keys := make([]string, evaluation.MaxBulkFeatures+1)
	for i := range keys {
		keys[i] = fmt.Sprintf("f%04d", i)
	}
	list, _ := json.Marshal(map[string]any{"user": "u", "features": keys})
	if r := s.do("POST", "/evaluate", string(list)); r.status != 422 || !strings.Contains(string(r.body), "leave out") {
		t.Errorf("POST /evaluate listing %d features = %d %s, want 422 saying to leave the list out", len(keys), r.status, r.body)
	}
	r = s.must(200, "POST", ofrepFlags, ofrepBody("u"))
	if got := strings.Count(string(r.body), `"variant":"A"`); got != n {
		t.Errorf("OFREP bulk answered %d flags, want %d", got, n)
	}
}

// TestHealthHead answers HEAD like GET, without a body.
func TestHealthHead(t *testing.T) {
	s := newServer(t, "", api.Options{})
	for _, path := range []string{"/healthz", "/readyz"} {
		get := s.must(200, "GET", path, nil)
		head := s.must(200, "HEAD", path, nil)
		if len(head.body) != 0 || head.header.Get("Content-Type") != get.header.Get("Content-Type") {
			t.Errorf("HEAD %s = %q with Content-Type %q, want no body and %q", path, head.body, head.header.Get("Content-Type"), get.header.Get("Content-Type"))
		}
	}
	failing := newServer(t, "", api.Options{Ready: func(ctx context.Context) error { return errors.New("disk gone") }})
	if r := failing.do("HEAD", "/readyz", nil); r.status != 503 || len(r.body) != 0 {
		t.Errorf("HEAD /readyz when not ready = %d %q, want 503 without a body", r.status, r.body)
	}
}
