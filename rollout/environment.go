package rollout

import (
	"context"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/environment"
	"github.com/rollout/rollout/rollout/feature"
)

// Production is the environment every database has from the start
// (environment.Production).
const Production = environment.Production

// Environment is one place where features are configured (see package
// environment).
type Environment = environment.Environment

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
