package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/ramp"
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

// RampActorFor is the actor of what a ramp does on its own (its steps, a
// pause by a step that could not apply): "ramp, started by alice".
func RampActorFor(r Ramp) string {
	if r.Actor == "" || r.Actor == "anonymous" || r.Actor == RampActor {
		return RampActor
	}
	return RampActor + ", started by " + r.Actor
}

// RampEvent returns the audit event that records the ramp update from
// prev to next (prev.ID == next.ID), and false when the update is none of
// an audited kind. by is who made it ("": the ramp itself).
func RampEvent(prev, next Ramp, by string, at time.Time) (audit.Event, bool) {
	e := audit.Event{Time: at, Actor: by, Feature: next.Feature, FeatureID: next.FeatureID, Subject: next.ID}
	if e.Actor == "" {
		e.Actor = RampActorFor(next)
	}
	what := fmt.Sprintf("ramp of %s to %s", next.Bucket, feature.Percent(next.Steps[len(next.Steps)-1].Share))
	switch {
	case next.State == ramp.Canceled && prev.State != ramp.Canceled:
		e.Kind, e.Summary = audit.RampCancel, "canceled the "+what+fmt.Sprintf(" after %d of %d steps", next.Next, len(next.Steps))
	case next.State == ramp.Paused && prev.State != ramp.Paused:
		e.Kind, e.Summary = audit.RampPause, "paused the "+what+reason(next.Reason)
	case next.State == ramp.Active && prev.State == ramp.Paused && next.ApprovedBy != prev.ApprovedBy:
		e.Kind, e.Summary = audit.RampResume, "resumed the "+what+", approving its steps (approvals cover the feature)"
	case next.State == ramp.Active && prev.State == ramp.Paused:
		e.Kind, e.Summary = audit.RampResume, "resumed the "+what
	case next.Next > prev.Next:
		i := next.Next - 1
		e.Kind, e.Summary = audit.RampStep, fmt.Sprintf("%s: step %d of %d, %s (the bucket had it already: nothing changed)", what, i+1, len(next.Steps), feature.Percent(next.Steps[i].Share))
	default:
		return audit.Event{}, false
	}
	return e, true
}

func reason(r string) string {
	if r == "" {
		return ""
	}
	return " (" + r + ")"
}

// RampCreateEvent returns the audit event that records the start of r.
func RampCreateEvent(r Ramp) audit.Event {
	shares := make([]string, len(r.Steps))
	for i, st := range r.Steps {
		shares[i] = feature.Percent(st.Share)
	}
	return audit.Event{
		Time: r.CreatedAt, Actor: r.Actor, Kind: audit.RampCreate, Feature: r.Feature, FeatureID: r.FeatureID, Subject: r.ID,
		Summary: fmt.Sprintf("started a ramp of %s: %s, first step at %s", r.Bucket, strings.Join(shares, " → "), r.Steps[0].At.UTC().Format(time.RFC3339)),
		Comment: r.Comment,
	}
}
