// Package settings holds the organisation-wide rules of who may change
// what in rollout: the editors' churn limit and the approvals policy
// (settings.go: Settings, ApprovalPolicy, their validation and the words
// of a change of them), and what those rules make of an editor's change
// (editors.go: CheckChange, CheckDocument and CheckSegment, with the
// account of what a change of rules or bucket_by does to the users no
// rule with conditions matches). Package rollout keeps them in its store
// (rollout.SettingsStore) and holds its changes to them.
package settings

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/feature"
)

// Settings are the organisation-wide rules of who may change what: the
// churn limit of editors and the approvals policy. Admins set them (PUT
// /api/settings); each saved change is a new Version and an audit event of
// kind settings.
type Settings struct {
	// MaxChurn is the largest fraction of users an editor's change may
	// move. A change above it, or any reshuffle, needs an admin, or an
	// approval where RequireApproval covers the feature.
	MaxChurn float64 `json:"max_churn"`
	// RequireApproval names the features whose editors' changes are
	// stored as change requests, to be approved by another person.
	RequireApproval ApprovalPolicy `json:"require_approval"`
	// Version counts saved changes of the settings: 0 for the defaults,
	// never saved.
	Version   int        `json:"version"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	UpdatedBy string     `json:"updated_by,omitempty"`
}

// ApprovalPolicy says which features need approvals: all of them, or those
// listed.
type ApprovalPolicy struct {
	All      bool     `json:"all"`
	Features []string `json:"features"`
}

// DefaultMaxChurn is the editors' churn limit until an admin sets one.
const DefaultMaxChurn = 0.25

// MaxApprovalFeatures bounds the list of features that need approvals.
const MaxApprovalFeatures = 1000

// Default returns the settings before any is saved: a churn limit of
// 25 %, no approvals.
func Default() Settings {
	return Settings{MaxChurn: DefaultMaxChurn, RequireApproval: ApprovalPolicy{Features: []string{}}}
}

// Covers reports whether the policy requires approvals for feature key.
func (p ApprovalPolicy) Covers(key string) bool {
	return p.All || slices.Contains(p.Features, key)
}

// Validate reports what is wrong with s: a churn limit outside 0..1, too
// many features, a feature key that is not one, a key listed twice.
func (s Settings) Validate() error {
	if err := feature.CheckMaxChurn(s.MaxChurn); err != nil {
		return err
	}
	fs := s.RequireApproval.Features
	if len(fs) > MaxApprovalFeatures {
		return feature.Errorf(feature.EInvalid, "require_approval lists %d features: list at most %d, or set \"all\": true", len(fs), MaxApprovalFeatures)
	}
	seen := make(map[string]bool, len(fs))
	for _, k := range fs {
		if !feature.ValidKey(k) {
			return feature.Errorf(feature.EInvalid, "require_approval.features: %q is not a feature key (1 to 64 of a-z, 0-9, '_', '.', '-')", k)
		}
		if seen[k] {
			return feature.Errorf(feature.EInvalid, "require_approval.features lists %q twice: list it once", k)
		}
		seen[k] = true
	}
	return nil
}

// Summary says what changed from prev to next, in words:
// "editors' churn limit 25 % → 10 %; approvals: none → checkout".
func Summary(prev, next Settings) string {
	var parts []string
	if prev.MaxChurn != next.MaxChurn {
		parts = append(parts, fmt.Sprintf("editors' churn limit %s → %s", feature.Percent(prev.MaxChurn), feature.Percent(next.MaxChurn)))
	}
	if a, b := prev.RequireApproval.describe(), next.RequireApproval.describe(); a != b {
		parts = append(parts, fmt.Sprintf("approvals required for %s → %s", a, b))
	}
	if len(parts) == 0 {
		return "settings saved unchanged"
	}
	return strings.Join(parts, "; ")
}

func (p ApprovalPolicy) describe() string {
	switch {
	case p.All:
		return "every feature"
	case len(p.Features) == 0:
		return "no feature"
	}
	fs := slices.Sorted(slices.Values(p.Features))
	if len(fs) > 5 {
		return fmt.Sprintf("%s and %d more", strings.Join(fs[:5], ", "), len(fs)-5)
	}
	return strings.Join(fs, ", ")
}
