package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

// historyReads is a store that counts the versions and the overrides in
// them that history reads return.
type historyReads struct {
	rollout.Store
	versions, overrides atomic.Int64
}

func (s *historyReads) count(vs ...rollout.Version) {
	s.versions.Add(int64(len(vs)))
	for _, v := range vs {
		s.overrides.Add(int64(len(v.Config.Overrides)))
	}
}

func (s *historyReads) VersionSummaries(ctx context.Context, key string, before, limit int) ([]rollout.Version, error) {
	vs, err := s.Store.VersionSummaries(ctx, key, before, limit)
	s.count(vs...)
	return vs, err
}

func (s *historyReads) Version(ctx context.Context, key string, n int) (rollout.Version, error) {
	v, err := s.Store.Version(ctx, key, n)
	s.count(v)
	return v, err
}

func (s *historyReads) Changes(ctx context.Context, q rollout.ChangeQuery) ([]rollout.Version, error) {
	vs, err := s.Store.Changes(ctx, q)
	s.count(vs...)
	return vs, err
}

// bigHistory is the dashboard over a feature "big" with 3,600 overrides
// whose description was edited edits times (220 in the issue that found its
// page taking 4.7 s), and the store's count of history reads.
func bigHistory(tb testing.TB, edits int) (*echo.Echo, *historyReads) {
	tb.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "rollout.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	reads := &historyReads{Store: db}
	svc, err := rollout.NewService(ctx, reads, nil)
	if err != nil {
		tb.Fatal(err)
	}
	f := feature.Feature{Key: "big", Enabled: true, Salt: "big", Buckets: []feature.Bucket{{Name: "A", Replicas: 50}, {Name: "B", Replicas: 50}}, Overrides: map[string]string{}}
	for i := range 3600 {
		f.Overrides[fmt.Sprintf("customer-%05d@example.com", i)] = []string{"A", "B"}[i%2]
	}
	if _, err := svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
		tb.Fatal(err)
	}
	for i := range edits {
		d := fmt.Sprintf("edit %d", i+1)
		if _, err := svc.Change(ctx, "big", change.Patch(&d, nil, nil), rollout.ChangeOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	e := api.New(svc, api.Options{Routes: web.Routes(svc, web.Options{SampleUsers: 1000})})
	return e, reads
}

// TestBigHistoryPages: the pages that show a feature's history (its page,
// the list, the audit log) read a bounded number of versions (the feature
// has 121, its page shows 100) and none of their overrides, however many
// the feature has; the feature's page shows at most 100 of the overrides
// themselves.
func TestBigHistoryPages(t *testing.T) {
	e, reads := bigHistory(t, 120)
	for _, tt := range []struct {
		path     string
		versions int64
	}{
		{"/ui/features/big", 100},
		{"/ui/features/big?changed=3", 101},
		{"/ui/", 1},
		{"/ui/changes", 100},
	} {
		reads.versions.Store(0)
		reads.overrides.Store(0)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s = %d %s", tt.path, rec.Code, rec.Body)
		}
		t.Logf("GET %s: %d bytes, %d versions read", tt.path, rec.Body.Len(), reads.versions.Load())
		if n := reads.versions.Load(); n > tt.versions {
			t.Errorf("GET %s read %d versions, want at most %d", tt.path, n, tt.versions)
		}
		want := int64(0)
		if tt.path == "/ui/features/big?changed=3" {
			want = 3600 // the banner's version, read whole
		}
		if n := reads.overrides.Load(); n > want {
			t.Errorf("GET %s read %d overrides of past versions, want at most %d", tt.path, n, want)
		}
		if rec.Body.Len() > 512<<10 {
			t.Errorf("GET %s: %d bytes, want at most %d", tt.path, rec.Body.Len(), 512<<10)
		}
	}
}

// BenchmarkBigHistoryPage is the page of a feature with 3,600 overrides and
// 221 versions.
func BenchmarkBigHistoryPage(b *testing.B) {
	e, _ := bigHistory(b, 220)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/features/big", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("page = %d", rec.Code)
		}
	}
}

// TestRangeBaseline: beside each change that moved users, the history, the
// banner and the churn chart say what range bucketing (LaunchDarkly,
// Unleash, GrowthBook, Flipt, flagd) would have moved, from the version's
// report; the creation and a change that moved no one get no baseline.
func TestRangeBaseline(t *testing.T) {
	a := newApp(t, 100)
	a.seed(t)
	v, err := a.svc.Version(context.Background(), "checkout", 2)
	if err != nil {
		t.Fatal(err)
	}
	if v.Report.RangeChurn <= 0 || v.Report.Churn <= 0 {
		t.Fatalf("adding D: churn %v, range churn %v; want both above 0", v.Report.Churn, v.Report.RangeChurn)
	}
	line := fmt.Sprintf("Range bucketing, as LaunchDarkly, Unleash, GrowthBook, Flipt and flagd split users, would have moved <b class=\"num\">%.2f%%</b>; rollout moved <b class=\"num\">%.2f%%</b>.", 100*v.Report.RangeChurn, 100*v.Report.Churn)
	body := a.get(t, "/ui/features/checkout?changed=2").Body.String()
	for _, want := range []string{
		`<p class="range">` + line,      // the banner
		`<p class="range-line">` + line, // the history
		fmt.Sprintf(`class="val-range">%.2f%% range bucketing</text>`, 100*v.Report.RangeChurn),
		"what range bucketing would have moved",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if n := strings.Count(body, `<p class="range-line">`); n != 1 {
		t.Errorf("%d range baselines in the history of a creation and one change, want 1", n)
	}
	desc := "same users"
	if _, err := a.svc.Change(context.Background(), "checkout", change.Patch(&desc, nil, nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(a.get(t, "/ui/features/checkout").Body.String(), `<p class="range-line">`); n != 1 {
		t.Errorf("%d range baselines after a change that moved no one, want still 1", n)
	}
}

// TestEscalationFollowsSettings: the feature page escalates changes above
// the organisation's churn limit for editors, 25 % until an admin sets
// another.
func TestEscalationFollowsSettings(t *testing.T) {
	a := newApp(t, 100)
	a.seed(t)
	if body := a.get(t, "/ui/features/checkout").Body.String(); !strings.Contains(body, `"churn_limit":0.25`) {
		t.Errorf("the page's data has no churn_limit 0.25 before the setting is changed")
	}
	s, err := a.svc.Settings(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.MaxChurn = 0.1
	if _, err := a.svc.UpdateSettings(context.Background(), s, 0, "admin", ""); err != nil {
		t.Fatal(err)
	}
	if body := a.get(t, "/ui/features/checkout").Body.String(); !strings.Contains(body, `"churn_limit":0.1`) {
		t.Errorf("the page's data has no churn_limit 0.1 after the setting is 10 %%")
	}
}
