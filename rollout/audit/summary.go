package audit

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rollout/rollout/rollout/feature"
)

// The words of the trail: what a change did to users, in percentages, as
// events and versions say it.

// ShareSummary says what a report's change did to users in percentages:
// "treatment 50 % → 10 %; 39.95 % of users moved, all into control".
// "No bucket" is what a disabled feature without fallback serves.
func ShareSummary(r feature.Report) string {
	var parts []string
	names := slices.Sorted(maps.Keys(r.SharesAfter))
	for name := range maps.Keys(r.SharesBefore) {
		if _, ok := r.SharesAfter[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var shares []string
	for _, name := range names {
		before, after := r.SharesBefore[name], r.SharesAfter[name]
		if feature.Percent(before) != feature.Percent(after) {
			shares = append(shares, fmt.Sprintf("%s %s → %s", name, feature.Percent(before), feature.Percent(after)))
		}
	}
	if len(shares) > 0 {
		parts = append(parts, strings.Join(shares, ", "))
	}
	approx := ""
	if r.Method == feature.MethodExpected {
		approx = "about "
	}
	switch {
	case r.Churn <= 0 && len(r.Rules) > 0:
		// The ring moved no one, but the populations of the rules that
		// changed (which the change's own words name) may have.
		parts = append(parts, ringMovedNoUser)
	case r.Churn <= 0:
		parts = append(parts, noUserMoved)
	default:
		into := map[string]float64{}
		for _, m := range r.Moves {
			into[m.To] += m.Share
		}
		dest := slices.SortedFunc(maps.Keys(into), func(a, b string) int {
			return cmp.Or(cmp.Compare(into[b], into[a]), cmp.Compare(a, b))
		})
		where := ""
		switch {
		case len(dest) == 1:
			where = ", all into " + bucketName(dest[0])
		case len(dest) > 1:
			var each []string
			for _, d := range dest {
				each = append(each, fmt.Sprintf("%s into %s", feature.Percent(into[d]), bucketName(d)))
			}
			where = ": " + strings.Join(each, ", ")
		}
		parts = append(parts, fmt.Sprintf("%s%s of users moved%s", approx, feature.Percent(r.Churn), where))
	}
	if n := len(r.OverrideChanges); n == 1 {
		parts = append(parts, "1 overridden user moved")
	} else if n > 1 {
		parts = append(parts, fmt.Sprintf("%d overridden users moved", n))
	}
	return strings.Join(parts, "; ")
}

const (
	noUserMoved     = "no user moved"
	ringMovedNoUser = "the ring moved no user; users matching changed rules may have changed bucket"
)

func bucketName(b string) string {
	if b == "" {
		return "no bucket"
	}
	return b
}

// VersionSummary is the summary of a version that a change whose
// summary is what made: what, then what it did to users in percentages
// (ShareSummary), unless it moved no one and changed no share.
func VersionSummary(what string, rep feature.Report) string {
	if s := ShareSummary(rep); s != noUserMoved && s != ringMovedNoUser {
		return JoinSummary(what, s)
	}
	return what
}

// PreviewSummary is ShareSummary of a change not made yet: "24.47 % of
// users would move, all into A".
func PreviewSummary(r feature.Report) string {
	return strings.ReplaceAll(ShareSummary(r), " moved", " would move")
}

// JoinSummary joins the parts of a summary that are not empty with "; ".
func JoinSummary(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "; ")
}
