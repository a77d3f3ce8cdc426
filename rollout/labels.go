package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/feature"
)

// SetLabels changes the feature's tags (when tags is not nil: the whole
// list, empty for none) and owner (when owner is not nil: "" for none).
// Tags are kept sorted. It moves no user.
func SetLabels(tags *[]string, owner *string) Change {
	var parts []string
	var sorted []string
	if tags != nil {
		sorted = slices.Clone(*tags)
		slices.Sort(sorted)
		if len(sorted) == 0 {
			parts = append(parts, "cleared the tags")
		} else {
			parts = append(parts, "tags set to "+feature.Abbreviate(strings.Join(sorted, ", ")))
		}
	}
	if owner != nil {
		if *owner == "" {
			parts = append(parts, "cleared the owner")
		} else {
			parts = append(parts, "owner set to "+feature.Abbreviate(*owner))
		}
	}
	return Change{
		summary: strings.Join(parts, ", "),
		apply: func(f *feature.Feature) error {
			if tags == nil && owner == nil {
				return feature.Errorf(feature.EInvalid, "nothing to change: give tags, owner or both")
			}
			if tags != nil {
				f.Tags = slices.Clone(sorted)
				if len(f.Tags) == 0 {
					f.Tags = nil
				}
			}
			if owner != nil {
				f.Owner = *owner
			}
			return nil
		},
	}
}

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
