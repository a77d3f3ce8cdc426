// Package storemetrics counts the failures of a rollout.Store in Prometheus
// metrics. It wraps the store the service is given, so that neither the
// domain nor the stores know of Prometheus.
package storemetrics

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/rollout/ramp"
	"github.com/rollout/rollout/rollout/request"
)

// New returns st with its failures counted in rollout_store_errors_total,
// by operation and code, a counter it registers in reg (or finds there,
// registered by an earlier call). A failure is an error of the database
// (feature.EUnavailable) or an unexpected one (feature.EInternal); "not
// found" and "conflict" are answers, not failures, and a cancelled request
// is the client's doing. Methods of rollout.Store that the wrapper does not
// know pass through uncounted. It panics if reg holds another metric of
// that name.
func New(reg prometheus.Registerer, st rollout.Store) rollout.Store {
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollout_store_errors_total",
		Help: "Failed store operations, by operation and code: unavailable (busy, locked, read-only, full, I/O) or internal.",
	}, []string{"op", "code"})
	if err := reg.Register(errs); err != nil {
		are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
		if !ok {
			panic("storemetrics: " + err.Error())
		}
		if errs, ok = are.ExistingCollector.(*prometheus.CounterVec); !ok {
			panic("storemetrics: rollout_store_errors_total is registered, but not as a counter vector")
		}
	}
	return &countingStore{Store: st, failures: errs}
}

type countingStore struct {
	rollout.Store
	failures *prometheus.CounterVec // op, code
}

func (s *countingStore) count(op string, err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	if code := feature.ErrorCode(err); code == feature.EUnavailable || code == feature.EInternal {
		s.failures.WithLabelValues(op, code).Inc()
	}
}

func (s *countingStore) Features(ctx context.Context) ([]feature.Feature, error) {
	fs, err := s.Store.Features(ctx)
	s.count("features", err)
	return fs, err
}

func (s *countingStore) CreateFeature(ctx context.Context, f feature.Feature, v rollout.Version) error {
	err := s.Store.CreateFeature(ctx, f, v)
	s.count("create_feature", err)
	return err
}

func (s *countingStore) UpdateFeature(ctx context.Context, f feature.Feature, v rollout.Version) error {
	err := s.Store.UpdateFeature(ctx, f, v)
	s.count("update_feature", err)
	return err
}

func (s *countingStore) ApplyRampStep(ctx context.Context, f feature.Feature, v rollout.Version, r ramp.Ramp) error {
	err := s.Store.ApplyRampStep(ctx, f, v, r)
	s.count("apply_ramp_step", err)
	return err
}

func (s *countingStore) ArchiveFeature(ctx context.Context, key string, version int, e audit.Event, approval *request.Decision, settle *idempotency.Settlement) error {
	err := s.Store.ArchiveFeature(ctx, key, version, e, approval, settle)
	s.count("archive_feature", err)
	return err
}

func (s *countingStore) RestoreFeature(ctx context.Context, f feature.Feature, v rollout.Version) error {
	err := s.Store.RestoreFeature(ctx, f, v)
	s.count("restore_feature", err)
	return err
}

func (s *countingStore) PurgeFeature(ctx context.Context, key string, e audit.Event, settle *idempotency.Settlement) error {
	err := s.Store.PurgeFeature(ctx, key, e, settle)
	s.count("purge_feature", err)
	return err
}

func (s *countingStore) VersionSummaries(ctx context.Context, key string, before, limit int) ([]rollout.Version, error) {
	vs, err := s.Store.VersionSummaries(ctx, key, before, limit)
	s.count("version_summaries", err)
	return vs, err
}

func (s *countingStore) UserVersions(ctx context.Context, key, user string, before, limit int) ([]rollout.Version, error) {
	vs, err := s.Store.UserVersions(ctx, key, user, before, limit)
	s.count("user_versions", err)
	return vs, err
}

func (s *countingStore) Version(ctx context.Context, key string, version int) (rollout.Version, error) {
	v, err := s.Store.Version(ctx, key, version)
	s.count("version", err)
	return v, err
}
