package rollout

import (
	"slices"
	"strings"

	"github.com/rollout/rollout/rollout/feature"
)

// Prerequisites (package feature's prerequisite.go): a feature served only
// to users whom other features serve some buckets. Setting them is a
// change like any other (SetPrerequisites); prepare checks that they fit
// the other features of the environment (checkPrerequisites), and a
// change's report names the dependants whose answers it may change
// (dependantChanges). Archiving a feature others require is refused
// (requiredBy).

// checkPrerequisites refuses, as feature.EPrerequisites, a change from
// cur to next whose prerequisites do not fit the environment's other
// features (feature.CheckPrerequisites), or that removes a bucket another
// feature requires of it.
func (s *Service) checkPrerequisites(cur feature.Feature, next feature.Feature) error {
	snap := s.Snapshot()
	lookup := func(k string) (feature.Feature, bool) {
		c := snap.Compiled(k)
		if c == nil {
			return feature.Feature{}, false
		}
		return c.Feature(), true
	}
	if !feature.SamePrerequisites(cur.Prerequisites, next.Prerequisites) && len(next.Prerequisites) > 0 {
		if err := feature.CheckPrerequisites(next, snap.Keys(), lookup); err != nil {
			return err
		}
	}
	for _, k := range snap.Dependants(next.Key) {
		d, _ := lookup(k)
		for _, p := range d.Prerequisites {
			if p.Feature != next.Key {
				continue
			}
			for _, b := range p.Buckets {
				if _, ok := next.Bucket(b); !ok {
					return &feature.Error{Code: feature.EPrerequisites, Field: "buckets", Message: "buckets: feature " + k + " requires bucket " + b + " of " + next.Key + ": change " + k + "'s prerequisites first (PUT /api/features/" + k + "/prerequisites)"}
				}
			}
		}
	}
	return nil
}

// dependantChanges lists, for the change of a feature from cur to next,
// the features that require it whose answers may change (see
// feature.DependantChangeOf), then those that require them, through
// chains, named with the feature they require.
func (s *Service) dependantChanges(cur, next *feature.Compiled) []feature.DependantChange {
	snap := s.Snapshot()
	key := next.Feature().Key
	var out []feature.DependantChange
	seen := map[string]bool{key: true}
	var frontier []string
	for _, k := range snap.Dependants(key) {
		for _, p := range snap.Compiled(k).Feature().Prerequisites {
			if p.Feature != key {
				continue
			}
			if d, ok := feature.DependantChangeOf(k, p, cur, next); ok {
				out = append(out, d)
				seen[k] = true
				frontier = append(frontier, k)
			}
		}
	}
	for depth := 1; depth < feature.MaxPrerequisiteDepth && len(frontier) > 0; depth++ {
		var up []string
		for _, through := range frontier {
			for _, k := range snap.Dependants(through) {
				if seen[k] {
					continue
				}
				seen[k] = true
				up = append(up, k)
				out = append(out, feature.DependantChange{Feature: k, Through: through,
					Text: k + " requires " + through + ", whose answers this change may change: some of its users may get another answer"})
			}
		}
		frontier = up
	}
	return out
}

// requiredBy refuses, with EConflict, to archive the feature key while
// features of any environment require it, naming them.
func (s *Service) requiredBy(key string) error {
	var names []string
	for _, svc := range append([]*Service{s}, s.envs.others(s)...) {
		for _, k := range svc.Snapshot().Dependants(key) {
			name := k
			if svc != s {
				name += " (" + svc.env + ")"
			}
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return feature.Errorf(feature.EConflict, "feature %q is a prerequisite of %s: remove it from their prerequisites first (PUT /api/features/K/prerequisites)", key, strings.Join(slices.Compact(names), ", "))
}
