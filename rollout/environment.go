package rollout

import (
	"context"
	"regexp"
	"time"

	"github.com/rollout/rollout/rollout/audit"
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
	Protected bool      `json:"protected"`
	Position  int       `json:"position"`
	CreatedAt time.Time `json:"created_at"`
}

// MaxEnvironments bounds how many environments a database may have: each
// is a snapshot in memory and a feed every instance follows.
const MaxEnvironments = 20

var environmentKey = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// ValidateEnvironmentKey refuses, with EInvalid, a key that is not 1 to 32
// lowercase letters, digits and dashes.
func ValidateEnvironmentKey(key string) error {
	if !environmentKey.MatchString(key) {
		return &feature.Error{Code: feature.EInvalid, Field: "key", Message: "an environment's key is 1 to 32 lowercase letters, digits and dashes, such as staging"}
	}
	return nil
}

// Validate refuses an environment whose key or name is not one.
func (e Environment) Validate() error {
	if err := ValidateEnvironmentKey(e.Key); err != nil {
		return err
	}
	if e.Name == "" || len(e.Name) > 100 {
		return &feature.Error{Code: feature.EInvalid, Field: "name", Message: "an environment's name is 1 to 100 bytes of text"}
	}
	if err := validateComment(e.Name); err != nil {
		return &feature.Error{Code: feature.EInvalid, Field: "name", Message: "an environment's name is plain text"}
	}
	return nil
}

// EUnknownEnvironment is the code of the error of a request naming an
// environment that does not exist (the API answers 404).
const EUnknownEnvironment = "unknown_environment"

// UnknownEnvironment is the error of a request naming an environment that
// does not exist.
func UnknownEnvironment(key string) error {
	if len(key) > 64 {
		key = key[:64] + "…"
	}
	return feature.Errorf(EUnknownEnvironment, "environment %q does not exist: GET /api/environments lists them", key)
}

// EnvironmentStore keeps the environments.
type EnvironmentStore interface {
	// Environments returns every environment, ordered by position then
	// key.
	Environments(ctx context.Context) ([]Environment, error)
	// CreateEnvironment stores e with the first version of each of
	// features in it (each Placed in e), and records the audit event,
	// in one transaction. EConflict when the key is taken.
	CreateEnvironment(ctx context.Context, e Environment, features []Placed, ev audit.Event) error
	// UpdateEnvironment replaces the name, protection and position of
	// the environment e.Key. ENotFound when there is none.
	UpdateEnvironment(ctx context.Context, e Environment, ev audit.Event) error
	// DeleteEnvironment removes the environment key with its features'
	// configurations, ramps and requests; its audit events stay.
	// EConflict while an active token is scoped to it or it is the last
	// one.
	DeleteEnvironment(ctx context.Context, key string, ev audit.Event) error
}

// Placed is a feature's version written in an environment other than the
// one a change is made in: a feature created in one environment exists in
// every other, switched off.
type Placed struct {
	Environment string
	Feature     feature.Feature
	Version     Version
}
