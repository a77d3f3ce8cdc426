package rollout

import (
	"context"
	"fmt"
	"time"
)

// Now returns the time by the service's clock (NewService's clock).
func (s *Service) Now() time.Time { return s.now() }

// LastEvaluated returns the start of the last UTC hour in which the feature
// key was evaluated by apps (its stored exposure counts, of any version),
// or the service's clock's now when its current counts in memory are not
// yet stored; zero when it never was. It reads every stored count of the
// feature.
func (s *Service) LastEvaluated(ctx context.Context, key string) (time.Time, error) {
	cur, err := s.known(ctx, key)
	if err != nil {
		return time.Time{}, err
	}
	if len(cur.Counts(nil)) > 0 {
		return s.now(), nil
	}
	stored, err := s.store.Exposures(ctx, key)
	if err != nil {
		return time.Time{}, fmt.Errorf("last evaluation of %q: %w", key, err)
	}
	var last time.Time
	for _, e := range stored {
		if e.FeatureID == cur.Feature().ID && e.Count > 0 && e.Hour.After(last) {
			last = e.Hour
		}
	}
	return last, nil
}
