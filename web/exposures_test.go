package web_test

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
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
	if err := a.db.AddExposures(ctx, []rollout.Exposure{
		{FeatureID: f.ID, Version: 1, Bucket: "on", Hour: h, Count: math.MaxInt64},
		{FeatureID: f.ID, Version: 1, Bucket: "on", Hour: h.Add(time.Hour), Count: math.MaxInt64},
		{FeatureID: f.ID, Version: 1, Bucket: "off", Hour: h, Count: math.MaxInt64},
	}); err != nil {
		t.Fatal(err)
	}
	desc := "darker"
	if _, err := a.svc.Change(ctx, "dark-mode", rollout.Patch(&desc, nil, nil), rollout.ChangeOptions{}); err != nil {
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
