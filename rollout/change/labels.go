package change

import (
	"slices"
	"strings"

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
