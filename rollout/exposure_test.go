package rollout_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

func TestAddCounts(t *testing.T) {
	for _, tt := range []struct{ a, b, want int64 }{
		{1, 2, 3},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 1, 1, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{-5, 3, 3},
		{0, -1, 0},
	} {
		if got := feature.AddCounts(tt.a, tt.b); got != tt.want {
			t.Errorf("AddCounts(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestValidateExposureBatchBounds(t *testing.T) {
	ok := feature.Exposure{Feature: "f", FeatureID: "id", Version: 1, Bucket: "A", Count: 1}
	with := func(change func(*feature.Exposure)) []feature.Exposure {
		e := ok
		change(&e)
		return []feature.Exposure{ok, e}
	}
	for _, tt := range []struct {
		name   string
		counts []feature.Exposure
		want   string
	}{
		{"largest count", with(func(e *feature.Exposure) { e.Count = feature.MaxExposureCount }), ""},
		{"empty", nil, "no counts"},
		{"count 2^63-1", with(func(e *feature.Exposure) { e.Count = math.MaxInt64 }), "exposure 1: count must be from 1 to 1000000000"},
		{"negative count", with(func(e *feature.Exposure) { e.Count = -1 }), "exposure 1: count"},
		{"version 2^32+1", with(func(e *feature.Exposure) { e.Version = 1<<32 + 1 }), "exposure 1: version"},
		{"version 2^31", with(func(e *feature.Exposure) { e.Version = 1 << 31 }), "exposure 1: version"},
		{"bad key", with(func(e *feature.Exposure) { e.Feature = "Not A Key" }), "exposure 1: feature"},
		{"1,001 counts", make([]feature.Exposure, feature.MaxExposureBatch+1), "at most 1000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := feature.ValidateExposureBatch("batch-01", tt.counts)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidateExposureBatch() = %v, want nil", err)
			case tt.want != "" && (feature.ErrorCode(err) != feature.EInvalid || !contains(err, tt.want)):
				t.Errorf("ValidateExposureBatch() = %v, want an invalid error about %q", err, tt.want)
			}
		})
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// TestExposureBatchClock: by the service's clock, counts are kept in the
// hour they arrive, and a batch ID is remembered for ExposureBatchMemory,
// then forgotten.
func TestExposureBatchClock(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	clock := newTestClock()
	clock.Add(time.Date(2026, 5, 1, 9, 59, 0, 0, time.UTC).Sub(clock.Now()))
	svc, err := rollout.NewService(ctx, db, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, svc, abc("f"))
	f, _ := svc.Snapshot().Feature("f")
	batch := []feature.Exposure{{Feature: "f", FeatureID: f.ID, Version: 1, Bucket: "A", Count: 2}}
	send := func(want bool) {
		t.Helper()
		res, err := svc.AddExposureBatch(ctx, "batch-clock", batch)
		if err != nil || res.Added != want {
			t.Fatalf("AddExposureBatch() at %v = %+v, %v; want added %v", clock.Now(), res, err, want)
		}
	}
	send(true)
	clock.Add(2 * time.Minute) // 10:01: the next hour
	send(false)
	svc.Evaluate("f", "u1")
	if err := svc.FlushExposures(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Add(rollout.ExposureBatchMemory - 3*time.Minute) // still remembered
	send(false)
	clock.Add(2 * time.Minute) // forgotten
	send(true)

	stored, err := db.Exposures(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range stored {
		got = append(got, fmt.Sprintf("%s/%s=%d", e.Hour.Format("02T15:04"), e.Bucket, e.Count))
	}
	evaluated, _ := svc.Evaluate("f", "u1")
	want := []string{"01T09:00/A=2", "02T10:00/A=2", fmt.Sprintf("01T10:00/%s=1", evaluated.Bucket)}
	if evaluated.Bucket == "A" {
		want = []string{"01T09:00/A=2", "01T10:00/A=1", "02T10:00/A=2"}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stored exposures = %v, want %v", got, want)
	}
}

// TestExposureVersionLookups: a batch that names more old versions than
// one request reads from history is answered EUnavailable after reading
// some (and nothing is added); sent again, it goes through.
func TestExposureVersionLookups(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rollout.db")
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	writer, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, writer, abc("f"))
	const versions = 50
	for i := 2; i <= versions; i++ {
		if _, err := writer.Change(ctx, "f", change.Patch(ptr(fmt.Sprintf("v%d", i)), nil, nil), rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f, _ := writer.Snapshot().Feature("f")
	if f.Version != versions {
		t.Fatalf("test setup: f is at version %d", f.Version)
	}
	svc, err := rollout.NewService(ctx, db, nil) // has served no old version
	if err != nil {
		t.Fatal(err)
	}
	var batch []feature.Exposure
	for v := 1; v <= versions; v++ {
		batch = append(batch, feature.Exposure{Feature: "f", FeatureID: f.ID, Version: v, Bucket: "B", Count: 1})
	}
	_, err = svc.AddExposureBatch(ctx, "batch-versions", batch)
	if feature.ErrorCode(err) != feature.EUnavailable {
		t.Fatalf("AddExposureBatch(%d old versions) = %v, want unavailable", versions-1, err)
	}
	if rep, _ := svc.Exposures(ctx, "f"); len(rep.Versions) != 0 {
		t.Fatalf("exposures after a batch answered unavailable = %+v, want none", rep.Versions)
	}
	res, err := svc.AddExposureBatch(ctx, "batch-versions", batch)
	if err != nil || !res.Added || res.Counted != versions {
		t.Fatalf("AddExposureBatch(again) = %+v, %v; want all %d counted", res, err, versions)
	}
}
