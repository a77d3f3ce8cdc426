package rollout

import (
	"context"
	"time"

	"github.com/rollout/rollout/rollout/exposure"
	"github.com/rollout/rollout/rollout/feature"
)

// estimateRules sets the Estimate of each population of rep.Rules, from the
// evaluations of feature key in the last 24 hours per rule: those stored
// for the hours that began in them (of every version) and those still in
// memory (exposure.EstimateRules).
func (s *Service) estimateRules(ctx context.Context, key string, rep *feature.Report) error {
	if len(rep.Rules) == 0 {
		return nil
	}
	cur, err := s.known(ctx, key)
	if err != nil {
		return err
	}
	stored, err := s.store.RuleExposures(ctx, cur.Feature().Key, s.now().UTC().Add(-24*time.Hour).Truncate(time.Hour).Add(time.Hour))
	if err != nil {
		return err
	}
	exposure.EstimateRules(rep, cur.Feature().ID, stored, s.inMemory(cur))
	return nil
}
