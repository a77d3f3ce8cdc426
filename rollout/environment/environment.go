// Package environment is what an environment is, and how one feature's
// configurations in two environments compare and are promoted from one to
// the other: pure functions over features, which the change pipeline
// (package rollout: Environments, the promotion as a change) and the API
// use. It imports the feature package only.
//
// The files: environment.go (Environment, its key and validation, the
// error of an unknown one), promote.go (the parts a promotion carries,
// Promote, Placement, Difference, Differs and Compare, and the answer of
// a batch promotion, BatchPromotion), definition.go (what environments
// share of a feature: its definition).
package environment

import (
	"regexp"
	"time"

	"github.com/rollout/rollout/rollout/feature"
)

// Production is the environment every database has from the start, and
// that everything made before environments existed belongs to.
const Production = "production"

// Environment is one place where features are configured: development,
// staging, production… A feature's definition (key, buckets, salt,
// description) is shared by every environment; its configuration
// (enabled, fallback, shares, rules, overrides, ramps, history) is each
// environment's own.
type Environment struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	// Protected: an editor's change there, a promotion included, is a
	// change request whatever its churn.
	Protected bool `json:"protected"`
	// RequireComment: every change there, by anyone (admins included), a
	// dry run aside, must carry a comment saying why.
	RequireComment bool      `json:"require_comment"`
	Position       int       `json:"position"`
	CreatedAt      time.Time `json:"created_at"`
}

// Max bounds how many environments a database may have: each is a
// snapshot in memory and a feed every instance follows.
const Max = 20

var keyPattern = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// ValidateKey refuses, with EInvalid, a key that is not 1 to 32 lowercase
// letters, digits and dashes.
func ValidateKey(key string) error {
	if !keyPattern.MatchString(key) {
		return &feature.Error{Code: feature.EInvalid, Field: "key", Message: "an environment's key is 1 to 32 lowercase letters, digits and dashes, such as staging"}
	}
	return nil
}

// Validate refuses an environment whose key or name is not one.
func (e Environment) Validate() error {
	if err := ValidateKey(e.Key); err != nil {
		return err
	}
	if e.Name == "" || len(e.Name) > 100 || !plainText(e.Name) {
		return &feature.Error{Code: feature.EInvalid, Field: "name", Message: "an environment's name is 1 to 100 bytes of plain text"}
	}
	return nil
}

func plainText(s string) bool {
	for _, r := range s {
		if r < ' ' || r == 0x7f || r == '\uFFFD' {
			return false
		}
	}
	return true
}

// EUnknown is the code of the error of a request naming an environment
// that does not exist (the API answers 404).
const EUnknown = "unknown_environment"

// Unknown is the error of a request naming an environment that does not
// exist.
func Unknown(key string) error {
	if len(key) > 64 {
		key = key[:64] + "…"
	}
	return feature.Errorf(EUnknown, "environment %q does not exist: GET /api/environments lists them", key)
}
