package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestAnyOfAndIgnoreCaseAPI: rules with an any-of condition and
// ignore_case are stored, said in words and served alike by GET, POST and
// OFREP; malformed ones (nested any-of, ignore_case on a number, an any-of
// of 100,000 entries, a body nesting any-of 10,000 deep) are refused with
// a JSON error naming the field, and change nothing.
func TestAnyOfAndIgnoreCaseAPI(t *testing.T) {
	s := newRulesServer(t)
	body := `{"rules":[{"name":"paying-or-staff","conditions":[{"any":[{"attribute":"plan","op":"eq","value":"enterprise"},
	  {"attribute":"email","op":"ends_with","value":"@Example.com","ignore_case":true}]}],"serve":{"bucket":"on"}}]}`
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", body)
	vs := s.must(http.StatusOK, "GET", "/api/features/checkout/versions", nil).json(t)
	summary := vs["versions"].([]any)[0].(map[string]any)["summary"].(string)
	if want := `set rules: paying-or-staff: if (plan = enterprise or email ends with "@Example.com" (any case)) → serve on`; summary != want {
		t.Errorf("summary %q, want %q", summary, want)
	}
	for _, ctx := range []struct{ get, post string }{
		{"ctx.email=bob@EXAMPLE.COM", `{"email":"bob@EXAMPLE.COM"}`},
		{"ctx.plan=enterprise", `{"plan":"enterprise"}`},
	} {
		e := s.must(http.StatusOK, "GET", "/evaluate?feature=checkout&user=u1&"+ctx.get, nil).json(t)
		if e["bucket"] != "on" || e["rule"] != "paying-or-staff" {
			t.Errorf("GET ?%s = %v, want rule paying-or-staff", ctx.get, e)
		}
		p := s.must(http.StatusOK, "POST", "/evaluate", `{"user":"u1","context":`+ctx.post+`}`).json(t)
		if r := p["results"].(map[string]any)["checkout"].(map[string]any); r["bucket"] != "on" || r["rule"] != "paying-or-staff" {
			t.Errorf("POST %s = %v", ctx.post, r)
		}
		o := s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/checkout", `{"context":{"targetingKey":"u1",`+strings.Trim(ctx.post, "{}")+`}}`).json(t)
		if o["variant"] != "on" || o["reason"] != "TARGETING_MATCH" || o["metadata"].(map[string]any)["rule"] != "paying-or-staff" {
			t.Errorf("OFREP %s = %v", ctx.post, o)
		}
	}
	if e := s.must(http.StatusOK, "GET", "/evaluate?feature=checkout&user=u1&ctx.email=bob@elsewhere.org", nil).json(t); e["rule"] != nil {
		t.Errorf("bob@elsewhere.org matched %v", e)
	}

	rule := func(cond string) string {
		return `{"rules":[{"name":"r","conditions":[` + cond + `],"serve":{"bucket":"on"}}]}`
	}
	entries := strings.Repeat(`{"attribute":"a","op":"present"},`, 100_000)
	deep := strings.Repeat(`{"any":[`, 10_000) + strings.Repeat(`]}`, 10_000)
	cases := []struct {
		name, body string
		status     int
		field      string
	}{
		{"nested any-of", rule(`{"any":[{"any":[{"attribute":"a","op":"present"}]}]}`), 422, "rules[0].conditions[0].any[0].any"},
		{"empty any-of", rule(`{"any":[]}`), 422, "rules[0].conditions[0].any"},
		{"ignore_case on a number", rule(`{"attribute":"seats","op":"gt","value":3,"ignore_case":true}`), 422, "rules[0].conditions[0].ignore_case"},
		{"a bad entry", rule(`{"any":[{"attribute":"a","op":"present"},{"attribute":"a","op":"like","value":"x"}]}`), 422, "rules[0].conditions[0].any[1].op"},
		{"100,000 entries", rule(`{"any":[` + strings.TrimSuffix(entries, ",") + `]}`), 0, ""},
		{"10,000 deep", rule(deep), 400, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do("PUT", "/api/features/checkout/rules", tc.body)
			if r.status < 400 || r.status >= 500 || (tc.status != 0 && r.status != tc.status) {
				t.Fatalf("PUT = %d %.300s, want %d", r.status, r.body, tc.status)
			}
			if tc.field != "" && !strings.Contains(string(r.body), `"field":"`+tc.field+`"`) {
				t.Errorf("PUT = %.300s, want field %s", r.body, tc.field)
			}
			if f, _ := s.svc.Snapshot().Feature("checkout"); f.Version != 2 {
				t.Errorf("after a refused PUT the feature is at version %d, want 2", f.Version)
			}
		})
	}
}
