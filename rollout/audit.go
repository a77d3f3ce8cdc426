package rollout

import (
	"context"
	"strings"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
)

// AuditStore keeps the audit trail. Events are written by the store's
// other methods, each in the transaction of the change it records; none
// is ever updated or deleted.
type AuditStore interface {
	// AuditEvents returns the events q selects, ordered by ID.
	AuditEvents(ctx context.Context, q audit.Query) ([]audit.Event, error)
}

// AuditEvents returns the events of the audit trail that q selects,
// audit.DefaultPage of them when q.Limit is 0. It takes turns with other
// history reads. Errors: EInvalid for a bad query, EUnavailable, the
// store's.
func (s *Service) AuditEvents(ctx context.Context, q audit.Query) ([]audit.Event, error) {
	if q.Limit == 0 {
		q.Limit = audit.DefaultPage
	}
	switch {
	case q.Limit < 0 || q.Limit > audit.MaxPage+1: // one more than a page tells whether another follows
		return nil, feature.Errorf(feature.EInvalid, "read at most %d audit events at a time: got limit %d", audit.MaxPage, q.Limit)
	case q.Before < 0 || q.After < 0:
		return nil, feature.Errorf(feature.EInvalid, "audit cursors are event IDs >= 0: got before %d, after %d", q.Before, q.After)
	case q.Kind != "" && !q.Kind.Valid():
		return nil, feature.Errorf(feature.EInvalid, "kind %q is not a kind of audit event: use one of %s", q.Kind, audit.KindNames())
	}
	if q.Environment == "" {
		q.Environment = s.env // its own and those of every environment
	}
	if err := s.history.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.history.release()
	return s.store.AuditEvents(ctx, q)
}

// VersionEvent returns the audit event that records version v of the
// feature (key, id): what a store writes with each version it appends.
// A version without a Kind is a change (a create at version 1).
func VersionEvent(key, id string, v Version) audit.Event {
	kind := v.Kind
	if kind == "" {
		kind = audit.Change
		if v.Version == 1 {
			kind = audit.Create
		}
	}
	churn := v.Report.Churn
	summary := v.Summary
	if s := audit.ShareSummary(v.Report); !strings.HasSuffix(summary, s) {
		// Versions say it themselves since their summaries speak
		// percentages; older ones did not.
		summary = audit.JoinSummary(summary, s)
	}
	return audit.Event{
		Time: v.Time, Actor: v.Actor, Kind: kind, Feature: key, FeatureID: id, Version: v.Version,
		Summary: summary, Comment: v.Comment, Churn: &churn, Subject: v.Subject,
	}
}
