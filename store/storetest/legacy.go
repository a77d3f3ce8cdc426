package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// LegacyHistory is a history as stores wrote it up to migration 00008,
// every version with its whole configuration, for the test that migration
// 00009 converts it: each store's test writes it into a database at 00008
// as those stores did, opens it (which migrates it) and checks that it
// reads back the same with WantLegacyHistory.
type LegacyHistory struct {
	Features []feature.Feature            // current configurations, by key
	Versions map[string][]rollout.Version // by feature key, oldest first
}

// NewLegacyHistory returns two features' histories that hold what the
// conversion could get wrong: overrides that come, go and come back to the
// same bucket, versions with none (an empty map, and nil), user IDs and
// bucket values that JSON escapes or spells in more than one way, a
// feature with no overrides ever, and a feature of one version.
func NewLegacyHistory() LegacyHistory {
	odd := "é\u2028 \"<&>\\\t/"
	steps := []map[string]string{
		{"alice": "treatment", odd: "control"},
		{"alice": "treatment", odd: "control", "bob": "off"},
		{odd: "control", "bob": "off"},
		{"alice": "treatment", odd: "control", "bob": "treatment"},
		{},
		nil,
		{"alice": "treatment"},
		{"alice": "treatment"},
	}
	h := LegacyHistory{Versions: map[string][]rollout.Version{}}
	f := newFeature("legacy")
	f.Buckets[1].Value = json.RawMessage(`{"n":[1,2.50,-0,1e3,1E-2],"s":"\u00e9\ud83d\ude00<>&\"","o":{"b":1,"a":[]}}`)
	for i, overrides := range steps {
		if i > 0 {
			f = next(f)
		}
		f.Overrides = maps.Clone(overrides)
		v := versionOf(f)
		v.Comment = fmt.Sprintf("step %d", i+1)
		h.Versions[f.Key] = append(h.Versions[f.Key], v)
	}
	h.Features = append(h.Features, f)

	plain := newFeature("plain")
	plain.Overrides = nil
	h.Versions[plain.Key] = []rollout.Version{versionOf(plain)}
	for range 2 {
		plain = next(plain)
		h.Versions[plain.Key] = append(h.Versions[plain.Key], versionOf(plain))
	}
	h.Features = append(h.Features, plain)

	single := newFeature("single")
	h.Versions[single.Key] = []rollout.Version{versionOf(single)}
	h.Features = append(h.Features, single)
	return h
}

// LegacyJSON returns v as the stores wrote configurations and reports
// before 00009: compact JSON, <, > and & as they are, times in UTC.
func LegacyJSON(v any) string {
	if f, ok := v.(feature.Feature); ok {
		f.CreatedAt, f.UpdatedAt = f.CreatedAt.UTC(), f.UpdatedAt.UTC()
		v = f
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // features and reports always encode
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// WantLegacyHistory checks that s, a database holding h as written before
// 00009 and then migrated, reads h back: every feature, every version on
// its own, in pages and as summaries. It then writes a version of each
// feature, on top of the converted history, and checks that too.
func WantLegacyHistory(t *testing.T, s Store, h LegacyHistory) {
	t.Helper()
	wantFeatures(t, s, h.Features...)
	for _, f := range h.Features {
		wantHistory(t, s, f.Key, h.Versions[f.Key])
	}
	for _, f := range h.Features {
		g := next(f)
		g.UpdatedAt = time.Now().UTC().Truncate(time.Microsecond)
		if g.Overrides != nil {
			g.Overrides["zed"] = "off"
		}
		v := write(t, s, g)
		wantHistory(t, s, g.Key, append(h.Versions[f.Key], v))
		sums, err := s.VersionSummaries(context.Background(), g.Key, 0, 1)
		if err != nil || len(sums) != 1 || !cmp.Equal(sums[0], summary(v)) {
			t.Errorf("VersionSummaries(%q, 0, 1) = %v, %v; want the version just written", g.Key, sums, err)
		}
	}
}
