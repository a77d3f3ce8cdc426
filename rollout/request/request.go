// Package request describes the change requests of rollout.
//
// Where the settings require approvals for a feature, an editor's change
// is not applied: it is stored as a Request with its preview (the churn
// report) and the feature's tag it was previewed at. Another person, an
// editor or an admin, approves it, which applies it with that tag as
// If-Match, or rejects it; its author may cancel it.
//
// The package is this file: what a request asks for (Spec, a change as
// data, and its kinds), a Request and its State, the versions of segments
// its preview read (SegmentRef), what selects requests (Query), their
// limits, and an approval being applied (Decision). Package rollout keeps
// them (rollout.RequestStore), makes the changes they ask for and applies
// them on approval, through its change pipeline.
package request

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/rollout/ramp"
)

// The kinds of requested changes: the routes that make them.
const (
	SpecPatch         = "patch"
	SpecAddBucket     = "add_bucket"
	SpecUpdateBucket  = "update_bucket"
	SpecRemoveBucket  = "remove_bucket"
	SpecSetBuckets    = "set_buckets"
	SpecSetOverride   = "set_override"
	SpecClearOverride = "clear_override"
	SpecReshuffle     = "reshuffle"
	SpecPromote       = "promote"
	SpecRollback      = "rollback"
	SpecSetRules      = "set_rules"
	// SpecSetPrerequisites sets the feature's prerequisites
	// (Spec.Prerequisites).
	SpecSetPrerequisites = "set_prerequisites"
	// SpecArchive and SpecRestore archive and restore the feature;
	// SpecRamp starts a ramp (Spec.Ramp). Package rollout's Service
	// makes them, not a change.Change.
	SpecArchive = "archive"
	SpecRestore = "restore"
	SpecRamp    = "ramp"
)

// Spec is a change as data (change.Change.Spec): its kind and the
// arguments of the function that makes it (Name is the bucket of
// update_bucket, remove_bucket and set_override).
type Spec struct {
	Kind        string           `json:"kind"`
	Name        string           `json:"name,omitempty"`
	Bucket      *feature.Bucket  `json:"bucket,omitempty"`
	Replicas    *int             `json:"replicas,omitempty"`
	Value       json.RawMessage  `json:"value,omitempty"`
	Buckets     []feature.Bucket `json:"buckets,omitempty"`
	Description *string          `json:"description,omitempty"`
	Enabled     *bool            `json:"enabled,omitempty"`
	Fallback    *string          `json:"fallback,omitempty"`
	User        string           `json:"user,omitempty"`
	Salt        string           `json:"salt,omitempty"`
	Version     int              `json:"version,omitempty"`
	// KeepOverrides: a rollback keeps the current overrides (see
	// rollout.RollbackOptions).
	KeepOverrides bool `json:"keep_overrides,omitempty"`
	// BucketBy is a patch's new bucket_by ("": the user ID).
	BucketBy *string `json:"bucket_by,omitempty"`
	// Rules are set_rules' rules (empty: none).
	Rules []feature.Rule `json:"rules,omitempty"`
	// Prerequisites are set_prerequisites' (empty: none).
	Prerequisites []feature.Prerequisite `json:"prerequisites,omitempty"`
	// Ramp is the ramp a ramp request starts.
	Ramp *ramp.Spec `json:"ramp,omitempty"`
	// From, Include and Source are a promotion's: the environment, the
	// parts promoted, and the source's configuration then.
	From    string           `json:"from,omitempty"`
	Include []string         `json:"include,omitempty"`
	Source  *feature.Feature `json:"source,omitempty"`
}

// Words names the kind of change for people: "update bucket".
func (sp Spec) Words() string { return strings.ReplaceAll(sp.Kind, "_", " ") }

// State is where a change request stands.
type State string

// The states of a request: open until approved (and applied), rejected or
// canceled, each final.
const (
	Open     State = "open"
	Applied  State = "applied"
	Rejected State = "rejected"
	Canceled State = "canceled"
)

// States are the states of requests.
var States = []State{Open, Applied, Rejected, Canceled}

// Request is a change request.
type Request struct {
	ID        string    `json:"id"`
	Feature   string    `json:"feature"`
	FeatureID string    `json:"feature_id"`
	State     State     `json:"state"`
	Author    string    `json:"author"`
	CreatedAt time.Time `json:"created_at"`
	Comment   string    `json:"comment"`
	Change    Spec      `json:"change"`
	// Summary says what the change does, in words and percentages.
	Summary string `json:"summary"`
	// IfMatch is the feature's tag the preview was made at, and
	// BaseVersion its version: the approval applies the change only to
	// that configuration. Both move when the approval finds the feature
	// moved on and previews the change again.
	IfMatch     string `json:"if_match"`
	BaseVersion int    `json:"base_version"`
	// Report is the preview: what the change does to users at
	// BaseVersion.
	Report feature.Report `json:"report"`
	// Segments are the versions of the segments the preview was made
	// with, by key: those the feature's rules use before and after the
	// change. An approval after any of them changed (or was deleted)
	// previews the change again instead of applying it.
	Segments map[string]SegmentRef `json:"segments,omitempty"`
	// RampSteps, of a ramp request, preview its steps one by one from
	// BaseVersion.
	RampSteps []ramp.StepPreview `json:"ramp_steps,omitempty"`
	// Repreviewed counts the previews made again because the feature or
	// a segment moved on.
	Repreviewed int `json:"repreviewed"`
	// DecidedBy, DecidedAt and Decision are the approval, rejection or
	// cancellation; AppliedVersion is the version an approval made.
	DecidedBy      string     `json:"decided_by,omitempty"`
	DecidedAt      *time.Time `json:"decided_at,omitempty"`
	Decision       string     `json:"decision_comment,omitempty"`
	AppliedVersion int        `json:"applied_version,omitempty"`
	// AppliedRamp is the ramp an approved ramp request started.
	AppliedRamp string `json:"applied_ramp,omitempty"`
	// Settles, when not nil, is the idempotency key of the request that
	// files this one: the store marks it done in the transaction of
	// rollout.RequestStore.CreateRequest, as it does a rollout.Version's.
	// It is not kept.
	Settles *idempotency.Settlement `json:"-"`
}

// SegmentRef is one version of a segment. A segment deleted and created
// again starts at version 1 anew: its creation time tells the two apart.
type SegmentRef struct {
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
}

// Query selects requests (rollout.RequestStore.Requests).
type Query struct {
	State   State  // "" for any
	Feature string // "" for any
	Limit   int    // at most this many; all when <= 0
}

// Limits of requests.
const (
	// MaxOpen is how many open requests one author may have.
	MaxOpen = 20
	// MaxPage is how many requests a list returns at most.
	MaxPage = 500
)

// Decision is an approval being applied: a version (or a ramp, or an
// archive: rollout.ArchiveStore.ArchiveFeature) carrying one makes the
// store mark the request applied in the same transaction (EConflict when
// it is no longer open), and record request_approve.
type Decision struct {
	ID      string
	By      string
	Comment string
}

// AuditEvent returns the event that records the request's creation or
// decision (kind), by actor.
func (r Request) AuditEvent(kind audit.Kind, actorName, comment string, at time.Time) audit.Event {
	churn := r.Report.Churn
	return audit.Event{
		Time: at, Actor: actorName, Kind: kind, Feature: r.Feature, FeatureID: r.FeatureID,
		Subject: r.ID, Summary: fmt.Sprintf("request by %s: %s", r.Author, r.Summary), Comment: comment, Churn: &churn,
	}
}
