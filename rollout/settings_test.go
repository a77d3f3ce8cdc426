package rollout_test

import (
	"strings"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

func TestSettingsValidate(t *testing.T) {
	ok := []rollout.Settings{
		rollout.DefaultSettings(),
		{MaxChurn: 0, RequireApproval: rollout.ApprovalPolicy{All: true}},
		{MaxChurn: 1, RequireApproval: rollout.ApprovalPolicy{Features: []string{"checkout", "a.b-c_d"}}},
	}
	for _, s := range ok {
		if err := s.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", s, err)
		}
	}
	many := make([]string, rollout.MaxApprovalFeatures+1)
	for i := range many {
		many[i] = "f" + strings.Repeat("x", i%50) + string(rune('a'+i%26))
	}
	bad := map[string]rollout.Settings{
		"negative":      {MaxChurn: -0.01},
		"above 1":       {MaxChurn: 1.01},
		"not a key":     {MaxChurn: 0.2, RequireApproval: rollout.ApprovalPolicy{Features: []string{"Checkout Flow"}}},
		"empty key":     {MaxChurn: 0.2, RequireApproval: rollout.ApprovalPolicy{Features: []string{""}}},
		"listed twice":  {MaxChurn: 0.2, RequireApproval: rollout.ApprovalPolicy{Features: []string{"a", "a"}}},
		"too many keys": {MaxChurn: 0.2, RequireApproval: rollout.ApprovalPolicy{Features: many}},
	}
	for name, s := range bad {
		if err := s.Validate(); feature.ErrorCode(err) != feature.EInvalid {
			t.Errorf("%s: Validate = %v, want %s", name, err, feature.EInvalid)
		}
	}
}

func TestSettingsSummary(t *testing.T) {
	def := rollout.DefaultSettings()
	for _, tt := range []struct {
		next rollout.Settings
		want string
	}{
		{def, "settings saved unchanged"},
		{rollout.Settings{MaxChurn: 0.1}, "editors' churn limit 25 % → 10 %"},
		{rollout.Settings{MaxChurn: 0.25, RequireApproval: rollout.ApprovalPolicy{Features: []string{"b", "a"}}}, "approvals required for no feature → a, b"},
		{rollout.Settings{MaxChurn: 0.5, RequireApproval: rollout.ApprovalPolicy{All: true}}, "editors' churn limit 25 % → 50 %; approvals required for no feature → every feature"},
		{rollout.Settings{MaxChurn: 0.25, RequireApproval: rollout.ApprovalPolicy{Features: []string{"a", "b", "c", "d", "e", "f", "g"}}}, "approvals required for no feature → a, b, c, d, e and 2 more"},
	} {
		if got := rollout.SettingsSummary(def, tt.next); got != tt.want {
			t.Errorf("SettingsSummary(default, %+v) = %q, want %q", tt.next, got, tt.want)
		}
	}
	p := rollout.ApprovalPolicy{Features: []string{"checkout"}}
	if !p.Covers("checkout") || p.Covers("other") || !(rollout.ApprovalPolicy{All: true}).Covers("other") {
		t.Error("Covers: want the listed features, or all with All")
	}
}
