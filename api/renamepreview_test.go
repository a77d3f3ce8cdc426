package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestRenamePreviewsNoMove: the preview of rules renamed, or renamed and
// reordered, without changing who matches, says no population moves
// ("rules": []); applying it moves no one either.
func TestRenamePreviewsNoMove(t *testing.T) {
	s := newRulesServer(t)
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", `{"rules":[
	 {"name":"staff","conditions":[{"attribute":"email","op":"ends_with","value":"@example.com"}],"serve":{"bucket":"on"}},
	 {"name":"pro","conditions":[{"attribute":"plan","op":"eq","value":"pro"}],"serve":{"bucket":"on"}},
	 {"name":"de","conditions":[{"attribute":"country","op":"in","value":["DE","AT"]}],"serve":{"ring":true}}]}`)
	renamed := `{"rules":[
	 {"name":"paying","conditions":[{"attribute":"plan","op":"eq","value":"pro"}],"serve":{"bucket":"on"}},
	 {"name":"employees","conditions":[{"attribute":"email","op":"ends_with","value":"@example.com"}],"serve":{"bucket":"on"}},
	 {"name":"dach","conditions":[{"attribute":"country","op":"in","value":["DE","AT"]}],"serve":{"ring":true}}]}`
	rep := s.must(http.StatusOK, "POST", "/api/features/checkout/preview", renamed)
	if pops, _ := rep.json(t)["rules"].([]any); len(pops) != 0 || strings.Contains(string(rep.body), "users matching") {
		t.Errorf("preview of renamed rules: %s, want no population", rep.body)
	}
	res := s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", renamed).json(t)
	if r := res["report"].(map[string]any); r["rules"] != nil || r["churn"].(float64) != 0 {
		t.Errorf("renamed rules applied: %v", r)
	}
}
