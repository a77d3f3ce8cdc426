package storemetrics_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollout/rollout/internal/storemetrics"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// failing answers each read with the error its method is given.
type failing struct {
	rollout.Store
	features, version, versions error
}

func (s failing) Features(context.Context) ([]feature.Feature, error) { return nil, s.features }

func (s failing) Version(context.Context, string, int) (rollout.Version, error) {
	return rollout.Version{}, s.version
}

func (s failing) VersionSummaries(context.Context, string, int, int) ([]rollout.Version, error) {
	return nil, s.versions
}

// counts returns the series of rollout_store_errors_total in reg by their
// "op/code" labels.
func counts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "rollout_store_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var op, code string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "op":
					op = l.GetValue()
				case "code":
					code = l.GetValue()
				}
			}
			got[op+"/"+code] = m.GetCounter().GetValue()
		}
	}
	return got
}

// TestCountsFailures: errors of the database and unexpected ones are
// counted by operation and code, wrapped or not; answers (not found) and
// cancelled requests are not; the errors pass through unchanged.
func TestCountsFailures(t *testing.T) {
	reg := prometheus.NewRegistry()
	busy := fmt.Errorf("read features: %w", feature.Errorf(feature.EUnavailable, "the database is busy"))
	broken := errors.New("disk on fire")
	st := storemetrics.New(reg, failing{
		features: busy,
		version:  feature.Errorf(feature.ENotFound, "no version 9"),
		versions: broken,
	})
	ctx := context.Background()
	for range 2 {
		if _, err := st.Features(ctx); err != busy {
			t.Errorf("Features = %v, want the store's error %v", err, busy)
		}
	}
	st.Version(ctx, "f", 9)
	st.VersionSummaries(ctx, "f", 0, 0)
	canceled := storemetrics.New(reg, failing{features: fmt.Errorf("read: %w", context.Canceled)})
	canceled.Features(ctx)

	want := map[string]float64{"features/unavailable": 2, "version_summaries/internal": 1}
	got := counts(t, reg)
	if len(got) != len(want) {
		t.Errorf("rollout_store_errors_total = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("rollout_store_errors_total{%s} = %v, want %v", k, got[k], v)
		}
	}
}

// TestNewTwice: a second store wrapped in the same registry counts in the
// same series rather than failing to register.
func TestNewTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	down := failing{features: feature.Errorf(feature.EUnavailable, "down")}
	storemetrics.New(reg, down).Features(context.Background())
	storemetrics.New(reg, down).Features(context.Background())
	if got := counts(t, reg)["features/unavailable"]; got != 2 {
		t.Errorf("rollout_store_errors_total{features/unavailable} = %v, want 2", got)
	}
}
