package rollout

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/feature"
)

// The audit trail. Every action that changes something (a feature, a ramp,
// a token) is recorded as an AuditEvent by the store in the transaction of
// the change itself, so that no change commits without its record and no
// record exists of a change that did not commit. Events are never edited
// or deleted: purging a feature keeps them.

// AuditKind says what an audited action did.
type AuditKind string

// The kinds of audited actions.
const (
	AuditCreate         AuditKind = "create"          // a feature was created
	AuditChange         AuditKind = "change"          // a feature's configuration changed
	AuditRollback       AuditKind = "rollback"        // a feature went back to an older version's configuration
	AuditOverride       AuditKind = "override"        // a user's override was set or cleared
	AuditArchive        AuditKind = "archive"         // a feature stopped being served, its history kept
	AuditRestore        AuditKind = "restore"         // an archived feature is served again
	AuditPurge          AuditKind = "purge"           // an archived feature and its history were removed
	AuditRampCreate     AuditKind = "ramp_create"     // a ramp was started
	AuditRampStep       AuditKind = "ramp_step"       // a ramp's step applied
	AuditRampPause      AuditKind = "ramp_pause"      // a ramp was paused, by hand or by a step that could not apply
	AuditRampResume     AuditKind = "ramp_resume"     // a paused ramp was resumed
	AuditRampCancel     AuditKind = "ramp_cancel"     // a ramp was canceled
	AuditTokenCreate    AuditKind = "token_create"    // an API token was created
	AuditTokenRevoke    AuditKind = "token_revoke"    // an API token was revoked
	AuditSettings       AuditKind = "settings"        // an organisation-wide setting changed
	AuditRequestCreate  AuditKind = "request_create"  // an editor's change was stored as a change request
	AuditRequestApprove AuditKind = "request_approve" // a change request was approved and applied
	AuditRequestReject  AuditKind = "request_reject"  // a change request was rejected
	AuditRequestCancel  AuditKind = "request_cancel"  // a change request was canceled by its author

	AuditWebhookCreate AuditKind = "webhook_create" // a webhook was registered
	AuditWebhookDelete AuditKind = "webhook_delete" // a webhook was removed
	AuditWebhookResume AuditKind = "webhook_resume" // a paused webhook was resumed
	AuditWebhookPaused AuditKind = "webhook_paused" // a webhook was paused after repeated failures
)

// AuditKinds are the kinds of audited actions.
var AuditKinds = []AuditKind{
	AuditCreate, AuditChange, AuditRollback, AuditOverride, AuditArchive, AuditRestore, AuditPurge,
	AuditRampCreate, AuditRampStep, AuditRampPause, AuditRampResume, AuditRampCancel,
	AuditTokenCreate, AuditTokenRevoke, AuditSettings,
	AuditRequestCreate, AuditRequestApprove, AuditRequestReject, AuditRequestCancel,
	AuditSegmentCreate, AuditSegmentChange, AuditSegmentDelete,
	AuditWebhookCreate, AuditWebhookDelete, AuditWebhookResume, AuditWebhookPaused,
}

// Valid reports whether k is one of AuditKinds.
func (k AuditKind) Valid() bool { return slices.Contains(AuditKinds, k) }

// AuditEvent is one entry of the audit trail.
type AuditEvent struct {
	// ID numbers events in the order they were written; the store sets
	// it.
	ID    int64     `json:"id"`
	Time  time.Time `json:"time"`
	Actor string    `json:"actor"`
	Kind  AuditKind `json:"kind"`
	// Feature is the key of the feature the action concerned ("" for
	// none: a token); FeatureID tells apart features made again under a
	// key after a purge.
	Feature   string `json:"feature"`
	FeatureID string `json:"feature_id,omitempty"`
	// Version is the feature's version the action made (0: none).
	Version int `json:"version,omitempty"`
	// Summary says what the action did in words and percentages.
	Summary string `json:"summary"`
	Comment string `json:"comment"`
	// Churn is the fraction of users the action moved, for actions that
	// made a version.
	Churn *float64 `json:"churn,omitempty"`
	// Subject names what else the action concerned: a ramp's ID, a
	// token's name.
	Subject string `json:"subject,omitempty"`
	// Request, on an archive's event, is the approval that applies it:
	// the store marks the request applied in the archive's transaction
	// (ArchiveStore.ArchiveFeature), as it does for a Version's.
	Request *RequestDecision `json:"-"`
	// Settles, on the event of an archive, a purge or a segment's
	// deletion, is the idempotency key of the request that makes it: the
	// store marks it done in the action's transaction, as it does a
	// Version's.
	Settles *Settlement `json:"-"`
}

// AuditQuery selects events of the audit trail (AuditStore.AuditEvents).
type AuditQuery struct {
	Feature string    // only events of this feature key; "" for all
	Actor   string    // only events of this actor; "" for anyone
	Kind    AuditKind // only events of this kind; "" for all
	Since   time.Time // only events at or after this time; zero for all
	// Before and After bound the events' IDs (exclusive; <= 0: no bound).
	Before, After int64
	// Ascending orders the events oldest first; otherwise newest first.
	Ascending bool
	Limit     int // at most this many; all when <= 0
}

// AuditStore keeps the audit trail. Events are written by the store's
// other methods, each in the transaction of the change it records; none
// is ever updated or deleted.
type AuditStore interface {
	// AuditEvents returns the events q selects, ordered by ID.
	AuditEvents(ctx context.Context, q AuditQuery) ([]AuditEvent, error)
}

// Limits of audit queries.
const (
	DefaultAuditPage = 100  // events per page when none is asked for
	MaxAuditPage     = 1000 // events per page at most
)

// AuditEvents returns the events of the audit trail that q selects,
// DefaultAuditPage of them when q.Limit is 0. It takes turns with other
// history reads. Errors: EInvalid for a bad query, EUnavailable, the
// store's.
func (s *Service) AuditEvents(ctx context.Context, q AuditQuery) ([]AuditEvent, error) {
	if q.Limit == 0 {
		q.Limit = DefaultAuditPage
	}
	switch {
	case q.Limit < 0 || q.Limit > MaxAuditPage+1: // one more than a page tells whether another follows
		return nil, feature.Errorf(feature.EInvalid, "read at most %d audit events at a time: got limit %d", MaxAuditPage, q.Limit)
	case q.Before < 0 || q.After < 0:
		return nil, feature.Errorf(feature.EInvalid, "audit cursors are event IDs >= 0: got before %d, after %d", q.Before, q.After)
	case q.Kind != "" && !q.Kind.Valid():
		return nil, feature.Errorf(feature.EInvalid, "kind %q is not a kind of audit event: use one of %s", q.Kind, kindList())
	}
	if err := s.history.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.history.release()
	return s.store.AuditEvents(ctx, q)
}

func kindList() string {
	names := make([]string, len(AuditKinds))
	for i, k := range AuditKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// VersionEvent returns the audit event that records version v of the
// feature (key, id): what a store writes with each version it appends.
// A version without a Kind is a change (a create at version 1).
func VersionEvent(key, id string, v Version) AuditEvent {
	kind := v.Kind
	if kind == "" {
		kind = AuditChange
		if v.Version == 1 {
			kind = AuditCreate
		}
	}
	churn := v.Report.Churn
	summary := v.Summary
	if s := ShareSummary(v.Report); !strings.HasSuffix(summary, s) {
		// Versions say it themselves since their summaries speak
		// percentages; older ones did not.
		summary = joinSummary(summary, s)
	}
	return AuditEvent{
		Time: v.Time, Actor: v.Actor, Kind: kind, Feature: key, FeatureID: id, Version: v.Version,
		Summary: summary, Comment: v.Comment, Churn: &churn,
	}
}

func joinSummary(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "; ")
}

// ShareSummary says what a report's change did to users in percentages:
// "treatment 50 % → 10 %; 39.95 % of users moved, all into control".
// "No bucket" is what a disabled feature without fallback serves.
func ShareSummary(r feature.Report) string {
	var parts []string
	names := slices.Sorted(maps.Keys(r.SharesAfter))
	for name := range maps.Keys(r.SharesBefore) {
		if _, ok := r.SharesAfter[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var shares []string
	for _, name := range names {
		before, after := r.SharesBefore[name], r.SharesAfter[name]
		if percent(before) != percent(after) {
			shares = append(shares, fmt.Sprintf("%s %s → %s", name, percent(before), percent(after)))
		}
	}
	if len(shares) > 0 {
		parts = append(parts, strings.Join(shares, ", "))
	}
	approx := ""
	if r.Method == feature.MethodExpected {
		approx = "about "
	}
	switch {
	case r.Churn <= 0 && len(r.Rules) > 0:
		// The ring moved no one, but the populations of the rules that
		// changed (which the change's own words name) may have.
		parts = append(parts, ringMovedNoUser)
	case r.Churn <= 0:
		parts = append(parts, noUserMoved)
	default:
		into := map[string]float64{}
		for _, m := range r.Moves {
			into[m.To] += m.Share
		}
		dest := slices.SortedFunc(maps.Keys(into), func(a, b string) int {
			return cmp.Or(cmp.Compare(into[b], into[a]), cmp.Compare(a, b))
		})
		where := ""
		switch {
		case len(dest) == 1:
			where = ", all into " + bucketName(dest[0])
		case len(dest) > 1:
			var each []string
			for _, d := range dest {
				each = append(each, fmt.Sprintf("%s into %s", percent(into[d]), bucketName(d)))
			}
			where = ": " + strings.Join(each, ", ")
		}
		parts = append(parts, fmt.Sprintf("%s%s of users moved%s", approx, percent(r.Churn), where))
	}
	if n := len(r.OverrideChanges); n == 1 {
		parts = append(parts, "1 overridden user moved")
	} else if n > 1 {
		parts = append(parts, fmt.Sprintf("%d overridden users moved", n))
	}
	return strings.Join(parts, "; ")
}

const (
	noUserMoved     = "no user moved"
	ringMovedNoUser = "the ring moved no user; users matching changed rules may have changed bucket"
)

func bucketName(b string) string {
	if b == "" {
		return "no bucket"
	}
	return b
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
func RampEvent(prev, next Ramp, by string, at time.Time) (AuditEvent, bool) {
	e := AuditEvent{Time: at, Actor: by, Feature: next.Feature, FeatureID: next.FeatureID, Subject: next.ID}
	if e.Actor == "" {
		e.Actor = RampActorFor(next)
	}
	what := fmt.Sprintf("ramp of %s to %s", next.Bucket, percent(next.Steps[len(next.Steps)-1].Share))
	switch {
	case next.State == RampCanceled && prev.State != RampCanceled:
		e.Kind, e.Summary = AuditRampCancel, "canceled the "+what+fmt.Sprintf(" after %d of %d steps", next.Next, len(next.Steps))
	case next.State == RampPaused && prev.State != RampPaused:
		e.Kind, e.Summary = AuditRampPause, "paused the "+what+reason(next.Reason)
	case next.State == RampActive && prev.State == RampPaused && next.ApprovedBy != prev.ApprovedBy:
		e.Kind, e.Summary = AuditRampResume, "resumed the "+what+", approving its steps (approvals cover the feature)"
	case next.State == RampActive && prev.State == RampPaused:
		e.Kind, e.Summary = AuditRampResume, "resumed the "+what
	case next.Next > prev.Next:
		i := next.Next - 1
		e.Kind, e.Summary = AuditRampStep, fmt.Sprintf("%s: step %d of %d, %s (the bucket had it already: nothing changed)", what, i+1, len(next.Steps), percent(next.Steps[i].Share))
	default:
		return AuditEvent{}, false
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
func RampCreateEvent(r Ramp) AuditEvent {
	shares := make([]string, len(r.Steps))
	for i, st := range r.Steps {
		shares[i] = percent(st.Share)
	}
	return AuditEvent{
		Time: r.CreatedAt, Actor: r.Actor, Kind: AuditRampCreate, Feature: r.Feature, FeatureID: r.FeatureID, Subject: r.ID,
		Summary: fmt.Sprintf("started a ramp of %s: %s, first step at %s", r.Bucket, strings.Join(shares, " → "), r.Steps[0].At.UTC().Format(time.RFC3339)),
		Comment: r.Comment,
	}
}
