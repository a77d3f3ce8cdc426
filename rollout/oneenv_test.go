package rollout_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/store/sqlite"
)

// TestOneEnvironmentKeepsEnvironments: a server or dashboard built on a
// service of a database's environments, without being handed them,
// serves those environments, protection included, rather than replacing
// them with production alone (as it once did, which lost protection).
func TestOneEnvironmentKeepsEnvironments(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	envs, err := rollout.NewEnvironments(ctx, db, func(env string) rollout.Store { return db.In(env) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envs.Create(ctx, rollout.Environment{Key: "staging", Name: "Staging", Protected: true}, rollout.EnvironmentOptions{Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	staging, _ := envs.Service("staging")
	if got := rollout.OneEnvironment(staging); got != envs {
		t.Fatalf("OneEnvironment of a service of environments = %p, want its environments %p", got, envs)
	}
	if list := envs.List(); len(list) != 2 || !list[1].Protected {
		t.Errorf("environments after OneEnvironment = %+v, want production and protected staging", list)
	}
	if _, ok := rollout.OneEnvironment(staging).Service("production"); !ok {
		t.Error("OneEnvironment lost production's service")
	}
}
