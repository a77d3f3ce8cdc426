// Package audit is what the audit trail of rollout is made of: the kinds of
// audited actions (Kind), the entries (Event), and the queries that read
// them (Query). Every action that changes something (a feature, a segment,
// a ramp, a request, the settings, a token, a webhook) is recorded as an
// Event by the store in the transaction of the change itself, so that no
// change commits without its record and no record exists of a change that
// did not commit. Events are never edited or deleted: purging a feature
// keeps them.
//
// Package rollout makes the events of its changes (rollout.VersionEvent,
// ramp.Event) and reads the trail (rollout.Service.AuditEvents);
// package webhook delivers it. It imports neither HTTP nor SQL.
//
// The kinds, events and queries are audit.go's; summary.go words what a
// change did to users in percentages (ShareSummary, PreviewSummary,
// VersionSummary), as events and versions say it.
package audit

import (
	"slices"
	"strings"
	"time"
)

// Kind says what an audited action did.
type Kind string

// The kinds of audited actions.
const (
	Create         Kind = "create"          // a feature was created
	Change         Kind = "change"          // a feature's configuration changed
	Rollback       Kind = "rollback"        // a feature went back to an older version's configuration
	Override       Kind = "override"        // a user's override was set or cleared
	Archive        Kind = "archive"         // a feature stopped being served, its history kept
	Restore        Kind = "restore"         // an archived feature is served again
	Purge          Kind = "purge"           // an archived feature and its history were removed
	RampCreate     Kind = "ramp_create"     // a ramp was started
	RampStep       Kind = "ramp_step"       // a ramp's step applied
	RampPause      Kind = "ramp_pause"      // a ramp was paused, by hand or by a step that could not apply
	RampResume     Kind = "ramp_resume"     // a paused ramp was resumed
	RampCancel     Kind = "ramp_cancel"     // a ramp was canceled
	TokenCreate    Kind = "token_create"    // an API token was created
	TokenRevoke    Kind = "token_revoke"    // an API token was revoked
	Settings       Kind = "settings"        // an organisation-wide setting changed
	RequestCreate  Kind = "request_create"  // an editor's change was stored as a change request
	RequestApprove Kind = "request_approve" // a change request was approved and applied
	RequestReject  Kind = "request_reject"  // a change request was rejected
	RequestCancel  Kind = "request_cancel"  // a change request was canceled by its author

	SegmentCreate Kind = "segment_create" // a segment was created
	SegmentChange Kind = "segment_change" // a segment's conditions or description changed
	SegmentDelete Kind = "segment_delete" // a segment was deleted

	WebhookCreate Kind = "webhook_create" // a webhook was registered
	WebhookDelete Kind = "webhook_delete" // a webhook was removed
	WebhookResume Kind = "webhook_resume" // a paused webhook was resumed
	WebhookPaused Kind = "webhook_paused" // a webhook was paused after repeated failures

	EnvironmentCreate Kind = "environment_create" // an environment was created
	EnvironmentChange Kind = "environment_change" // an environment's name, protection or position changed
	EnvironmentDelete Kind = "environment_delete" // an environment was deleted
	Promote           Kind = "promote"            // a feature's configuration was promoted from another environment
	SessionCreate     Kind = "session_create"     // a person signed in with single sign-on
	SessionRevoke     Kind = "session_revoke"     // a person's session was revoked, or they signed out
	MetricCreate      Kind = "metric_create"      // a metric of experiments was created
	MetricDelete      Kind = "metric_delete"      // a metric and its tracked events were deleted
	ExperimentStart   Kind = "experiment_start"   // an experiment was started on a feature
	ExperimentStop    Kind = "experiment_stop"    // an experiment was stopped

	ScheduleCreate Kind = "schedule_create" // a change was scheduled for a set time
	ScheduleApply  Kind = "schedule_apply"  // a scheduled change applied: the version it made
	ScheduleFail   Kind = "schedule_fail"   // a scheduled change could not apply at its time, with the reason
	ScheduleCancel Kind = "schedule_cancel" // a scheduled change was canceled, by hand or by its feature's archive
)

// Kinds are the kinds of audited actions.
var Kinds = []Kind{
	Create, Change, Rollback, Override, Archive, Restore, Purge,
	RampCreate, RampStep, RampPause, RampResume, RampCancel,
	TokenCreate, TokenRevoke, Settings,
	RequestCreate, RequestApprove, RequestReject, RequestCancel,
	SegmentCreate, SegmentChange, SegmentDelete,
	WebhookCreate, WebhookDelete, WebhookResume, WebhookPaused,
	EnvironmentCreate, EnvironmentChange, EnvironmentDelete, Promote,
	SessionCreate, SessionRevoke,
	MetricCreate, MetricDelete, ExperimentStart, ExperimentStop,
	ScheduleCreate, ScheduleApply, ScheduleFail, ScheduleCancel,
}

// Shared reports whether actions of kind k concern every environment
// (tokens, segments, webhooks, sign-ins, environments themselves) rather
// than one.
func (k Kind) Shared() bool {
	switch k {
	case TokenCreate, TokenRevoke, SegmentCreate, SegmentChange, SegmentDelete,
		WebhookCreate, WebhookDelete, WebhookResume, WebhookPaused,
		EnvironmentCreate, EnvironmentChange, EnvironmentDelete,
		SessionCreate, SessionRevoke, MetricCreate, MetricDelete:
		return true
	}
	return false
}

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool { return slices.Contains(Kinds, k) }

// KindNames lists Kinds, comma-separated, for messages.
func KindNames() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// Event is one entry of the audit trail.
type Event struct {
	// ID numbers events in the order they were written; the store sets
	// it.
	ID    int64     `json:"id"`
	Time  time.Time `json:"time"`
	Actor string    `json:"actor"`
	Kind  Kind      `json:"kind"`
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
	// Environment is the environment the action was taken in; "" for
	// actions of a Shared kind. The store sets it.
	Environment string `json:"environment"`
}

// Query selects events of the audit trail.
type Query struct {
	Feature string // only events of this feature key; "" for all
	Actor   string // only events of this actor; "" for anyone
	// ActorContains keeps only events whose actor contains it, ignoring
	// case: "carol" finds "ed, approved by carol"; "" for anyone.
	ActorContains string
	Kind          Kind // only events of this kind; "" for all
	// Environment, when not "", selects the events of this environment
	// and those of every environment (Shared kinds).
	Environment string
	Since       time.Time // only events at or after this time; zero for all
	// Before and After bound the events' IDs (exclusive; <= 0: no bound).
	Before, After int64
	// Ascending orders the events oldest first; otherwise newest first.
	Ascending bool
	Limit     int // at most this many; all when <= 0
}

// Limits of audit queries.
const (
	DefaultPage = 100  // events per page when none is asked for
	MaxPage     = 1000 // events per page at most
)
