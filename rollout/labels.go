package rollout

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on a feature's tags and owner.
const (
	MaxTags       = 20
	MaxTagBytes   = 32
	MaxOwnerBytes = 128
)

// tagPattern is a tag: lower-case letters, digits and '_', '.', ':', '-',
// starting with a letter or digit, so that a tag reads the same in a URL,
// a filter and a script.
var tagPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.:-]{0,31}$`)

// validateLabels reports what is wrong with a feature's tags and owner as
// an EInvalid *Error: at most MaxTags distinct tags of tagPattern, and an
// owner of at most MaxOwnerBytes of UTF-8 with no control character and no
// space at either end (a name, an e-mail address, a team).
func validateLabels(tags []string, owner string) error {
	if len(tags) > MaxTags {
		return Errorf(EInvalid, "a feature has at most %d tags, got %d", MaxTags, len(tags))
	}
	for i, t := range tags {
		if !tagPattern.MatchString(t) {
			return Errorf(EInvalid, "tag %q is invalid: use 1 to %d characters of a-z, 0-9, '_', '.', ':', '-', starting with a letter or digit", abbreviate(t), MaxTagBytes)
		}
		if slices.Contains(tags[:i], t) {
			return Errorf(EInvalid, "tag %q appears twice", t)
		}
	}
	if len(owner) > MaxOwnerBytes || !utf8.ValidString(owner) {
		return Errorf(EInvalid, "owner must be valid UTF-8 of at most %d bytes", MaxOwnerBytes)
	}
	if strings.IndexFunc(owner, unicode.IsControl) >= 0 {
		return Errorf(EInvalid, "owner must not hold control characters (tabs, new lines, …)")
	}
	if strings.TrimSpace(owner) != owner {
		return Errorf(EInvalid, "owner must not start or end with a space")
	}
	return nil
}

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
			parts = append(parts, "tags set to "+abbreviate(strings.Join(sorted, ", ")))
		}
	}
	if owner != nil {
		if *owner == "" {
			parts = append(parts, "cleared the owner")
		} else {
			parts = append(parts, "owner set to "+abbreviate(*owner))
		}
	}
	return Change{
		summary: strings.Join(parts, ", "),
		apply: func(f *Feature) error {
			if tags == nil && owner == nil {
				return Errorf(EInvalid, "nothing to change: give tags, owner or both")
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

// And returns the change that applies c, then next, with both summaries.
func (c Change) And(next Change) Change {
	summary := c.summary
	if next.summary != "" {
		if summary != "" {
			summary += ", "
		}
		summary += next.summary
	}
	return Change{
		summary: summary,
		apply: func(f *Feature) error {
			if err := c.apply(f); err != nil {
				return err
			}
			return next.apply(f)
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
	for i := range cur.served {
		if cur.served[i].Load() > 0 {
			return s.now(), nil
		}
	}
	stored, err := s.store.Exposures(ctx, key)
	if err != nil {
		return time.Time{}, fmt.Errorf("last evaluation of %q: %w", key, err)
	}
	var last time.Time
	for _, e := range stored {
		if e.FeatureID == cur.feature.ID && e.Count > 0 && e.Hour.After(last) {
			last = e.Hour
		}
	}
	return last, nil
}
