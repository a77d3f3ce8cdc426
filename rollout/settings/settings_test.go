package settings_test

import (
	"strings"
	"testing"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/settings"
)

func TestValidate(t *testing.T) {
	ok := []settings.Settings{
		settings.Default(),
		{MaxChurn: 0, RequireApproval: settings.ApprovalPolicy{All: true}},
		{MaxChurn: 1, RequireApproval: settings.ApprovalPolicy{Features: []string{"checkout", "a.b-c_d"}}},
	}
	for _, s := range ok {
		if err := s.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", s, err)
		}
	}
	many := make([]string, settings.MaxApprovalFeatures+1)
	for i := range many {
		many[i] = "f" + strings.Repeat("x", i%50) + string(rune('a'+i%26))
	}
	bad := map[string]settings.Settings{
		"negative":      {MaxChurn: -0.01},
		"above 1":       {MaxChurn: 1.01},
		"not a key":     {MaxChurn: 0.2, RequireApproval: settings.ApprovalPolicy{Features: []string{"Checkout Flow"}}},
		"empty key":     {MaxChurn: 0.2, RequireApproval: settings.ApprovalPolicy{Features: []string{""}}},
		"listed twice":  {MaxChurn: 0.2, RequireApproval: settings.ApprovalPolicy{Features: []string{"a", "a"}}},
		"too many keys": {MaxChurn: 0.2, RequireApproval: settings.ApprovalPolicy{Features: many}},
	}
	for name, s := range bad {
		if err := s.Validate(); feature.ErrorCode(err) != feature.EInvalid {
			t.Errorf("%s: Validate = %v, want %s", name, err, feature.EInvalid)
		}
	}
}

func TestSummary(t *testing.T) {
	def := settings.Default()
	for _, tt := range []struct {
		next settings.Settings
		want string
	}{
		{def, "settings saved unchanged"},
		{settings.Settings{MaxChurn: 0.1}, "editors' churn limit 25 % → 10 %"},
		{settings.Settings{MaxChurn: 0.25, RequireApproval: settings.ApprovalPolicy{Features: []string{"b", "a"}}}, "approvals required for no feature → a, b"},
		{settings.Settings{MaxChurn: 0.5, RequireApproval: settings.ApprovalPolicy{All: true}}, "editors' churn limit 25 % → 50 %; approvals required for no feature → every feature"},
		{settings.Settings{MaxChurn: 0.25, RequireApproval: settings.ApprovalPolicy{Features: []string{"a", "b", "c", "d", "e", "f", "g"}}}, "approvals required for no feature → a, b, c, d, e and 2 more"},
	} {
		if got := settings.Summary(def, tt.next); got != tt.want {
			t.Errorf("Summary(default, %+v) = %q, want %q", tt.next, got, tt.want)
		}
	}
	p := settings.ApprovalPolicy{Features: []string{"checkout"}}
	if !p.Covers("checkout") || p.Covers("other") || !(settings.ApprovalPolicy{All: true}).Covers("other") {
		t.Error("Covers: want the listed features, or all with All")
	}
}
