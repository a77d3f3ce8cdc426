package feature

import "testing"

func TestOpenFeatureReason(t *testing.T) {
	tests := []struct {
		name string
		e    Evaluation
		want string
	}{
		{"static ring", Evaluation{Reason: ReasonRing, Static: true}, "STATIC"},
		{"static wins over single", Evaluation{Reason: ReasonRing, Static: true, Single: true}, "STATIC"},
		{"ring of one behind rules", Evaluation{Reason: ReasonRing, Single: true}, "DEFAULT"},
		{"ring of several", Evaluation{Reason: ReasonRing}, "SPLIT"},
		{"override", Evaluation{Reason: ReasonOverride}, "TARGETING_MATCH"},
		{"rule", Evaluation{Reason: ReasonTargetingMatch, Rule: "beta"}, "TARGETING_MATCH"},
		{"bucket_by missing", Evaluation{Reason: ReasonDefault}, "DEFAULT"},
		{"disabled", Evaluation{Reason: ReasonDisabled, Static: true}, "DISABLED"},
		{"unknown", Evaluation{Reason: "other"}, "UNKNOWN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.OpenFeatureReason(); got != tt.want {
				t.Errorf("%+v.OpenFeatureReason() = %q, want %q", tt.e, got, tt.want)
			}
		})
	}
}
