package web_test

import (
	"context"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/feature/hll"
)

// TestServedSaturated: counts whose sum passes the largest int64 (the
// previous version's, in several hours and buckets) show on the feature's
// page as that many, never as a negative number or an error.
func TestServedSaturated(t *testing.T) {
	a := newApp(t, 100)
	a.seed(t)
	ctx := context.Background()
	f, _ := a.svc.Snapshot().Feature("dark-mode")
	h := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := a.db.AddExposures(ctx, []feature.Exposure{
		{FeatureID: f.ID, Version: 1, Bucket: "on", Hour: h, Count: math.MaxInt64},
		{FeatureID: f.ID, Version: 1, Bucket: "on", Hour: h.Add(time.Hour), Count: math.MaxInt64},
		{FeatureID: f.ID, Version: 1, Bucket: "off", Hour: h, Count: math.MaxInt64},
	}); err != nil {
		t.Fatal(err)
	}
	desc := "darker"
	if _, err := a.svc.Change(ctx, "dark-mode", change.Patch(&desc, nil, nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	res := a.get(t, "/ui/features/dark-mode")
	body := res.Body.String()
	if res.Code != http.StatusOK {
		t.Fatalf("GET /ui/features/dark-mode = %d:\n%s", res.Code, body)
	}
	if !strings.Contains(body, "the 9,223,372,036,854,775,807 evaluations apps made at version 1") {
		t.Errorf("the page does not report the saturated total of version 1:\n%s", body)
	}
	if strings.Contains(body, "(-") || strings.Contains(body, ">-") {
		t.Errorf("the page shows a negative count:\n%s", body)
	}
}

// usersSketch returns the binary sketch of n distinct users named after
// prefix.
func usersSketch(prefix string, n int64) []byte {
	s := new(hll.Sketch)
	for i := range n {
		s.Insert(hll.Hash(prefix + strconv.FormatInt(i, 10)))
	}
	return s.Append(nil)
}

// TestServedSRM: the feature's page gives the sample-ratio check of the
// distinct users it shows, and warns when they do not match the shares
// served; evaluations repeated for the same users do not count.
func TestServedSRM(t *testing.T) {
	a := newApp(t, 100)
	a.seed(t)
	ctx := context.Background()
	f, _ := a.svc.Snapshot().Feature("dark-mode")
	shares, _ := a.svc.Snapshot().Shares("dark-mode")
	h := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(prefix string, on, off int64) {
		t.Helper()
		if err := a.db.AddExposures(ctx, []feature.Exposure{
			{FeatureID: f.ID, Version: f.Version, Bucket: "on", Hour: h, Count: 3 * on, Users: usersSketch(prefix+"on-", on)},
			{FeatureID: f.ID, Version: f.Version, Bucket: "off", Hour: h, Count: 3 * off, Users: usersSketch(prefix+"off-", off)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	n := int64(1_000_000)
	on := int64(math.Round(shares["on"] * float64(n)))
	add("a", on, n-on)
	add("a", on, n-on) // the same users again: no more users
	body := a.get(t, "/ui/features/dark-mode").Body.String()
	if !regexp.MustCompile(`data-mismatch="false">Sample-ratio check of the ≈ (9[89]\d|1,0[01]\d),\d{3} distinct users at version 1`).MatchString(body) || !strings.Contains(body, "the counts match the shares") {
		t.Errorf("the page has no passing sample-ratio check of about 1,000,000 users:\n%s", body)
	}
	add("b", 100_000, 0) // a tenth more users on than the shares say
	body = a.get(t, "/ui/features/dark-mode").Body.String()
	if !strings.Contains(body, `class="srm error" data-mismatch="true"`) || !strings.Contains(body, "Sample-ratio mismatch (p &lt; 0.001)") {
		t.Errorf("the page does not warn of a sample-ratio mismatch:\n%s", body)
	}
}
