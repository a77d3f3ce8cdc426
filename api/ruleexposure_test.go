package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
)

// estimates returns, of a rules preview, each population's text and its
// estimate's up_to.
func estimates(t *testing.T, s *testServer, body string) map[string]float64 {
	t.Helper()
	p := s.must(http.StatusOK, "POST", "/api/features/checkout/preview", body).json(t)
	out := map[string]float64{}
	for _, r := range p["rules"].([]any) {
		pc := r.(map[string]any)
		est, ok := pc["estimate"].(map[string]any)
		if !ok {
			t.Fatalf("population %v has no estimate", pc)
		}
		if want := fmt.Sprintf("up to %s evaluations a day", commas(int64(est["up_to"].(float64)))); est["text"] != want {
			t.Errorf("estimate text %q, want %q", est["text"], want)
		}
		out[pc["text"].(string)] = est["up_to"].(float64)
	}
	return out
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestRulePreviewEstimates: evaluations are counted per rule, by the
// server and from apps' batches (an old client's count without a rule
// adds to its bucket only), and a rules preview estimates each population
// from the counts of the rules and ring it comes from.
func TestRulePreviewEstimates(t *testing.T) {
	s := newRulesServer(t)
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", contractRules)
	const staff, de, ring = 7, 3, 5
	for i := range staff {
		s.must(http.StatusOK, "GET", fmt.Sprintf("/evaluate?feature=checkout&user=s%d&ctx.email=s%d@example.com", i, i), nil)
	}
	for i := range de {
		s.must(http.StatusOK, "POST", "/evaluate", fmt.Sprintf(`{"user":"d%d","context":{"country":"DE"}}`, i))
	}
	for i := range ring {
		s.must(http.StatusOK, "GET", fmt.Sprintf("/evaluate?feature=checkout&user=r%d", i), nil)
	}
	onlyDE := `{"rules":[{"name":"rest-de","conditions":[{"attribute":"country","op":"in","value":["DE","AT"]}],"serve":{"ring":true}}]}`
	const removeStaff = `users matching email ends with "@example.com": on → the next matching rule, or the ring`
	// Counts still in memory count.
	if got := estimates(t, s, onlyDE)[removeStaff]; got != staff {
		t.Errorf("estimate of removing staff, before a flush = %v, want %d", got, staff)
	}
	if err := s.svc.FlushExposures(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := estimates(t, s, onlyDE)
	if got[removeStaff] != staff || len(got) != 1 {
		t.Errorf("estimates of removing staff = %v, want %q: %d", got, removeStaff, staff)
	}

	// An app's batch: with rule "staff", and an old client's without.
	f, _ := s.svc.Snapshot().Feature("checkout")
	withRule := exposure("checkout", f.ID, f.Version, "on", 4)
	withRule["rule"] = "staff"
	s.must(http.StatusOK, "POST", "/api/exposures", exposureBatch("batch-rule-1", withRule, exposure("checkout", f.ID, f.Version, "on", 100)))
	if got := estimates(t, s, onlyDE)[removeStaff]; got != staff+4 {
		t.Errorf("estimate after a batch = %v, want %d", got, staff+4)
	}
	rep := s.must(http.StatusOK, "GET", "/api/features/checkout/exposures", nil).json(t)
	if total := rep["total"].(float64); total != staff+de+ring+4+100 {
		t.Errorf("exposures total = %v, want %d (per bucket, with or without a rule)", total, staff+de+ring+4+100)
	}
	for name, rule := range map[string]any{"unknown rule": "nope", "malformed rule": "a b", "not a string": 3} {
		bad := exposure("checkout", f.ID, f.Version, "on", 1)
		bad["rule"] = rule
		if r := s.do("POST", "/api/exposures", exposureBatch("batch-rule-2", bad)); r.status/100 != 4 {
			t.Errorf("batch with %s: %d %s, want 4xx", name, r.status, r.body)
		}
	}

	// A rule whose bucket changes: its own evaluations.
	staffOff := `{"rules":[{"name":"staff","conditions":[{"attribute":"email","op":"ends_with","value":"@example.com"}],"serve":{"bucket":"off"}},` +
		`{"name":"rest-de","conditions":[{"attribute":"country","op":"in","value":["DE","AT"]}],"serve":{"ring":true}}]}`
	if got := estimates(t, s, staffOff); got[`users matching email ends with "@example.com": on → off`] != staff+4 || len(got) != 1 {
		t.Errorf("estimates of staff serving off = %v, want up to %d", got, staff+4)
	}

	// A rule inserted first may take users from every rule and the ring.
	ent := `{"rules":[{"name":"ent","conditions":[{"attribute":"plan","op":"eq","value":"enterprise"}],"serve":{"bucket":"on"}}]}`
	p := s.must(http.StatusOK, "POST", "/api/features/checkout/preview", ent).json(t)
	first := p["rules"].([]any)[0].(map[string]any)["estimate"].(map[string]any)
	from := []string{}
	for _, r := range first["from"].([]any) {
		from = append(from, r.(string))
	}
	if first["up_to"].(float64) != staff+4+de+ring || !slices.Equal(from, []string{"staff", "rest-de", ""}) {
		t.Errorf("estimate of a rule inserted first = %v, want up to %d from staff, rest-de and the ring", first, staff+4+de+ring)
	}
}
