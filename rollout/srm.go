package rollout

import (
	"context"
	"slices"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/feature/hll"
	"github.com/rollout/rollout/rollout/stats"
)

// maxSRMVersions bounds how many old versions one exposure report reads
// from the history to check (the most recent with counts); older ones get
// no check.
const maxSRMVersions = 32

// versionSRM returns the sample-ratio checks of the versions of the
// feature c with distinct users (version → bucket → users, estimated by
// sketches: see stats.CheckSRMEstimated), newest first: the
// current one's from memory, at most maxSRMVersions older ones' from the
// history (the most recent; a version the history lacks is left out).
func (s *Service) versionSRM(ctx context.Context, c *feature.Compiled, counts map[int]map[string]int64) ([]stats.SRM, error) {
	versions := make([]int, 0, len(counts))
	for v := range counts {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	slices.Reverse(versions)
	var out []stats.SRM
	lookups := maxSRMVersions
	for _, v := range versions {
		var shares map[string]float64
		switch {
		case v == c.Feature().Version:
			shares = c.ServedRing().Shares() // built when c was compiled
		case lookups > 0:
			lookups--
			ver, err := s.store.Version(ctx, c.Feature().Key, v)
			if feature.ErrorCode(err) == feature.ENotFound || err == nil && ver.Config.ID != "" && ver.Config.ID != c.Feature().ID {
				continue
			}
			if err != nil {
				return nil, err
			}
			shares = ver.Config.ServedRing().Shares()
		default:
			continue
		}
		if r, ok := stats.CheckSRMEstimated(v, counts[v], shares, hll.RelativeError); ok {
			out = append(out, r)
		}
	}
	return out, nil
}
