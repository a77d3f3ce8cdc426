package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Patterns that cost too much are refused wherever rules and segments are
// written, with a 400 naming the condition, and change nothing.
func TestPatternLimitsAPI(t *testing.T) {
	const email = `[a-z0-9._%+-]{1,64}@[a-z0-9.-]{1,255}\.[a-z]{2,63}`
	words := strings.Repeat(`(?:\w?){1000}`, 19) + "$" // 248 bytes
	big := `[a-z]{1,250}[0-9]{1,250}[A-Z]{1,250}`      // 1,499 instructions
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	matches := func(p string) string { return `{"attribute":"email","op":"matches","value":` + quote(p) + `}` }
	inStaff := `{"op":"in_segment","value":"staff"}`
	ruleList := func(conds ...string) string {
		return `[{"name":"ok","conditions":[],"serve":{"bucket":"on"}},{"name":"mail","conditions":[` + strings.Join(conds, ",") + `],"serve":{"bucket":"on"}}]`
	}
	rules := func(conds ...string) string { return `{"rules":` + ruleList(conds...) + `}` }
	doc := func(rules, segment string) map[string]any {
		var d map[string]any
		if err := json.Unmarshal([]byte(`{"features":[{"key":"checkout","buckets":[{"name":"off","replicas":100},{"name":"on","replicas":100}],"rules":`+rules+`}],"segments":[`+segment+`]}`), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	seg := `{"key":"staff","description":"","conditions":[{"attribute":"plan","op":"eq","value":"pro"},` + matches(email) + `]}`
	const invalid = http.StatusUnprocessableEntity // bodies and documents alike, as every invalid value
	cases := []struct {
		name, method, path string
		body               any
		status             int
		want               string
	}{
		{"rules: 248 bytes", "PUT", "/api/features/checkout/rules", rules(`{"attribute":"plan","op":"eq","value":"pro"}`, matches(words)), invalid, `rules[1].conditions[1].value: rule "mail": the pattern of a matches condition on attribute "email" repeats more than 256 times`},
		{"rules: program", "PUT", "/api/features/checkout/rules", rules(matches(big)), invalid, `rules[1].conditions[0].value: rule "mail": the pattern of a matches condition on attribute "email" compiles to 1499 instructions; at most 1000`},
		{"rules: total", "PUT", "/api/features/checkout/rules", rules(matches(email), matches(email)), invalid, `rules[1].conditions[1]: rule "mail": the feature's matches patterns`},
		{"rules: with a segment", "PUT", "/api/features/checkout/rules", rules(inStaff, matches(email)), invalid, `rules[1].conditions[1]: rule "mail": the feature's matches patterns (a segment's counted at each in_segment that uses it) compile to 1528`},
		{"segment create: 248 bytes", "POST", "/api/segments", `{"key":"s2","description":"","conditions":[` + matches(words) + `]}`, invalid, `conditions[0].value: segment "s2": the pattern of a matches condition on attribute "email" repeats more than 256 times`},
		{"segment create: total", "POST", "/api/segments", `{"key":"s2","description":"","conditions":[` + matches(email) + `,` + matches(email) + `]}`, invalid, `conditions[1]: segment "s2": the segment's matches patterns compile to 1528 instructions`},
		{"segment update: program", "PUT", "/api/segments/staff", `{"description":"","conditions":[` + matches(big) + `]}`, invalid, `conditions[0].value: segment "staff": the pattern of a matches condition on attribute "email" compiles to 1499 instructions`},
		{"plan: 248 bytes", "POST", "/api/plan", doc(ruleList(matches(words)), ``), invalid, `features[0].rules[1].conditions[0].value: rule "mail": the pattern of a matches condition on attribute "email" repeats more than 256 times`},
		{"apply: program", "POST", "/api/apply", map[string]any{"document": doc(ruleList(matches(big)), ``)}, invalid, `features[0].rules[1].conditions[0].value: rule "mail": the pattern of a matches condition on attribute "email" compiles to 1499 instructions`},
		{"plan: segment", "POST", "/api/plan", doc(`[]`, `{"key":"s2","conditions":[`+matches(words)+`]}`), invalid, `segments[0].conditions[0].value: segment "s2": the pattern of a matches condition on attribute "email" repeats more than 256 times`},
		{"plan: total with a segment", "POST", "/api/plan", doc(ruleList(inStaff, matches(email)), seg), invalid, `features[0].rules[1].conditions[1]: rule "mail": the feature's matches patterns (a segment's counted at each in_segment that uses it) compile to 1528`},
	}
	s := newRulesServer(t)
	s.must(http.StatusCreated, "POST", "/api/segments", seg)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rev := s.svc.Snapshot().Revision()
			r := s.do(tc.method, tc.path, tc.body)
			if r.status != tc.status || !strings.Contains(string(r.body), jsonText(tc.want)) {
				t.Errorf("%s %s = %d %s, want %d saying %q", tc.method, tc.path, r.status, r.body, tc.status, tc.want)
			}
			if got := s.svc.Snapshot().Revision(); got != rev {
				t.Errorf("revision %d after a refused change, want %d", got, rev)
			}
		})
	}
	// The ordinary e-mail pattern is allowed.
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", `{"rules":[{"name":"mail","conditions":[`+matches(email)+`],"serve":{"bucket":"on"}}]}`)
	e := s.must(http.StatusOK, "POST", "/evaluate", `{"user":"u1","context":{"email":"ann@example.com"},"features":["checkout"]}`).json(t)
	if r := e["results"].(map[string]any)["checkout"].(map[string]any); r["rule"] != "mail" {
		t.Errorf("evaluation with the e-mail pattern: %v, want rule mail", r)
	}
}

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
