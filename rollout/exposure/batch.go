package exposure

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/feature"
)

// BatchResult is what rollout.Service.AddExposureBatch did with a batch.
type BatchResult struct {
	// Added is false when the batch added nothing: its ID had been
	// counted already, or every count was skipped.
	Added bool
	// Counted is how many of the batch's counts were added.
	Counted int
	// Skipped are the counts left out, by index.
	Skipped []Skipped
}

// Skipped is a count of a batch that was left out, and why: its feature
// no longer exists (deleted since the app's copy was made), or its
// version is missing from the feature's history. These are not errors: an
// app may well have counted a feature that was deleted since, and its
// batch must not be refused for it, again and again.
type Skipped struct {
	Index     int    `json:"index"`
	FeatureID string `json:"feature_id"`
	Reason    string `json:"reason"`
}

// Names are the bucket and rule names of a feature at a version.
type Names struct {
	Buckets, Rules []string
}

// NamesOf returns the names of f's buckets and rules.
func NamesOf(f feature.Feature) Names {
	names := Names{Buckets: make([]string, len(f.Buckets)), Rules: make([]string, len(f.Rules))}
	for i, b := range f.Buckets {
		names.Buckets[i] = b.Name
	}
	for i, r := range f.Rules {
		names.Rules[i] = r.Name
	}
	return names
}

// CheckBatch checks each of a batch's counts against the features byID
// (by feature ID) and the names namesAt says each feature had at the
// count's version: it returns the counts to add, with their feature's key
// and the hour now, and the result of those skipped (their feature no
// longer exists, or namesAt returns ENotFound: the history lacks the
// version). A count whose key is not its feature's, whose version is
// after the feature's current one, or whose bucket or rule the feature
// did not have at that version refuses the batch whole (EInvalid, naming
// the count's index); namesAt's other errors end the check.
func CheckBatch(counts []feature.Exposure, byID map[string]*feature.Compiled, now time.Time, namesAt func(c *feature.Compiled, version int) (Names, error)) ([]feature.Exposure, BatchResult, error) {
	var res BatchResult
	kept := make([]feature.Exposure, 0, len(counts))
	for i, e := range counts {
		c := byID[e.FeatureID]
		if c == nil {
			res.Skipped = append(res.Skipped, Skipped{Index: i, FeatureID: e.FeatureID,
				Reason: "no feature has this ID: it was deleted, or never existed"})
			continue
		}
		f := c.Feature()
		switch {
		case e.Feature != "" && e.Feature != f.Key:
			return nil, BatchResult{}, feature.Errorf(feature.EInvalid, "exposure %d: feature_id %q is the ID of feature %q, not %q", i, e.FeatureID, f.Key, e.Feature)
		case e.Version > f.Version:
			return nil, BatchResult{}, feature.Errorf(feature.EInvalid, "exposure %d: feature %q is at version %d: version %d does not exist", i, f.Key, f.Version, e.Version)
		}
		if e.Bucket != "" || e.Rule != nil && *e.Rule != "" {
			names, err := namesAt(c, e.Version)
			switch {
			case feature.ErrorCode(err) == feature.ENotFound:
				res.Skipped = append(res.Skipped, Skipped{Index: i, FeatureID: e.FeatureID,
					Reason: fmt.Sprintf("version %d of feature %q is not in its history", e.Version, f.Key)})
				continue
			case err != nil:
				return nil, BatchResult{}, err
			case e.Bucket != "" && !slices.Contains(names.Buckets, e.Bucket):
				return nil, BatchResult{}, feature.Errorf(feature.EInvalid, "exposure %d: feature %q had no bucket %q at version %d (it had %s)", i, f.Key, e.Bucket, e.Version, strings.Join(names.Buckets, ", "))
			case e.Rule != nil && *e.Rule != "" && !slices.Contains(names.Rules, *e.Rule):
				return nil, BatchResult{}, feature.Errorf(feature.EInvalid, "exposure %d: feature %q had no rule %q at version %d", i, f.Key, *e.Rule, e.Version)
			}
		}
		e.Feature, e.Hour = f.Key, now
		kept = append(kept, e)
	}
	return kept, res, nil
}
