package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
)

// Webhooks. An admin registers URLs that receive every audited event
// (audit.Event) as a POST of its JSON, signed with a secret. Delivery is an
// outbox read after commit: each webhook keeps a cursor, the ID of the
// last event it has handled, and a delivery worker (Worker) claims due
// webhooks from the store with a lease, sends their next event, and
// records the attempt. A change never waits for a delivery, and nothing
// is sent of a change that did not commit (its event does not exist).
// Delivery is at least once: a worker that sends an event and loses its
// lease before recording it lets another send it again.

// Limits and policy of webhooks.
const (
	MaxHooks     = 50   // registered webhooks at most
	MaxURL       = 2048 // bytes of a webhook's URL at most
	MinSecret    = 16   // bytes of a secret at least
	MaxSecret    = 256  // bytes of a secret at most
	MaxEvents    = 32   // entries of a webhook's events filter at most
	DeliveryKept = 100  // delivery log entries kept per webhook
	// RetryBase is the wait after a webhook's first failed attempt;
	// each further failure doubles it (3 min, 6 min, 12 min, … 12.8 h).
	RetryBase = 3 * time.Minute
	// MaxFailures failed attempts in a row pause a webhook: the
	// tenth comes about 25.5 hours after the first, so that an event is
	// retried for 24 hours with exponential backoff before the admin is
	// told (an audit.WebhookPaused event).
	MaxFailures = 10
)

// State says whether a webhook is being delivered.
type State string

// The states of a
const (
	Active State = "active"
	Paused State = "paused" // after MaxFailures failures in a row, until resumed
)

// Hook is a URL that receives audited events.
type Hook struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Secret signs each delivery (Signature). It is kept in the
	// store in the clear, as signing needs it, and never shown again
	// after the webhook is created.
	Secret string `json:"-"`
	// Events are the kinds of events delivered: ["*"] for all.
	Events    []string  `json:"events"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
	State     State     `json:"state"`
	// PausedAt and PausedReason say when and why a paused webhook was
	// paused.
	PausedAt     *time.Time `json:"paused_at,omitempty"`
	PausedReason string     `json:"paused_reason,omitempty"`
	// Cursor is the ID of the last audit event the webhook has handled:
	// delivered, given up on, or skipped by Events.
	Cursor int64 `json:"cursor"`
	// Failures counts the failed attempts in a row at the event after
	// Cursor, since FirstFailure; NextAttempt is when it is tried next.
	Failures     int        `json:"failures"`
	FirstFailure *time.Time `json:"first_failure_at,omitempty"`
	NextAttempt  time.Time  `json:"next_attempt_at"`
}

// Wants reports whether h delivers events of kind k.
func (h Hook) Wants(k audit.Kind) bool {
	return slices.Contains(h.Events, "*") || slices.Contains(h.Events, string(k)) ||
		(EventName(k) != "" && slices.Contains(h.Events, EventName(k)))
}

// The events of change requests, which a webhook's filter may name
// instead of their audit kinds, so that a team is told when a request
// waits and when it is decided.
const (
	RequestCreated = "request.created" // request_create
	RequestDecided = "request.decided" // request_approve, request_reject, request_cancel
)

// The events of scheduled changes: a schedule's change applied at its
// time, or failed then (with the reason).
const (
	ScheduleApplied = "schedule.applied" // schedule_apply
	ScheduleFailed  = "schedule.failed"  // schedule_fail
)

// eventNames are the events a webhook's filter may name besides audit
// kinds.
var eventNames = []string{RequestCreated, RequestDecided, ScheduleApplied, ScheduleFailed}

// EventName is the event of kind k that webhooks name (RequestCreated,
// RequestDecided), "" for kinds that have none.
func EventName(k audit.Kind) string {
	switch k {
	case audit.RequestCreate:
		return RequestCreated
	case audit.RequestApprove, audit.RequestReject, audit.RequestCancel:
		return RequestDecided
	case audit.ScheduleApply:
		return ScheduleApplied
	case audit.ScheduleFail:
		return ScheduleFailed
	}
	return ""
}

// Delivery is one attempt to deliver an event to a
type Delivery struct {
	ID        int64      `json:"id"`
	Webhook   string     `json:"webhook"`
	EventID   int64      `json:"event_id"`
	EventKind audit.Kind `json:"event_kind"`
	Attempt   int        `json:"attempt"`
	Time      time.Time  `json:"time"`
	// Status is the HTTP status the endpoint answered (0: none).
	Status int `json:"status"`
	// Error says why the attempt failed ("": it succeeded), in words of
	// the server's own that hold nothing the endpoint sent: "HTTP 404",
	// "timeout", "connection refused". It is what a pause reports, in the
	// audit trail, which viewers and the other webhooks read.
	Error string `json:"error,omitempty"`
	// Detail is what the endpoint answered to a failed attempt (the first
	// 200 bytes of its body), or the connection's error, without the URL.
	// Endpoints may echo their URL's secret path in it, so it is kept only
	// in the delivery log, which only admins read.
	Detail   string `json:"detail,omitempty"`
	Duration int64  `json:"duration_ms"`
}

// OK reports whether the attempt delivered its event.
func (d Delivery) OK() bool { return d.Error == "" }

// Claim is a webhook a delivery worker holds (its lease) with the
// next event to send it.
type Claim struct {
	Hook  Hook
	Event audit.Event
}

// Outcome is what a delivery worker records of an attempt: the
// delivery log entry and the webhook's state after it.
type Outcome struct {
	Delivery Delivery
	// Cursor, Failures, FirstFailure and NextAttempt are the webhook's
	// new values; Pause, when not "", pauses it with this reason and
	// records an audit.WebhookPaused event.
	Cursor       int64
	Failures     int
	FirstFailure *time.Time
	NextAttempt  time.Time
	Pause        string
}

// Store is what Hooks need of the storage: it keeps webhooks and their
// delivery log. Its errors are *feature.Error values (ENotFound,
// EConflict, EUnavailable) or failures of the store.
type Store interface {
	// CreateWebhook stores h with its cursor at the last audit event, so
	// that it receives the events that follow, and records an
	// audit.WebhookCreate event. EConflict when MaxHooks exist.
	CreateWebhook(ctx context.Context, h Hook) (Hook, error)
	// Webhooks returns every webhook, oldest first.
	Webhooks(ctx context.Context) ([]Hook, error)
	// Webhook returns one webhook; ENotFound when there is none.
	Webhook(ctx context.Context, id string) (Hook, error)
	// WebhookDeliveries returns the webhook's latest attempts, newest
	// first, at most limit.
	WebhookDeliveries(ctx context.Context, id string, limit int) ([]Delivery, error)
	// DeleteWebhook removes a webhook and its log, recording an
	// audit.WebhookDelete event by actor; ENotFound when there is none.
	DeleteWebhook(ctx context.Context, id, actor string, at time.Time) error
	// ResumeWebhook makes a paused webhook active again, due at once with
	// no failures, recording an audit.WebhookResume event by actor.
	// ENotFound when there is none, EConflict when it is not paused.
	ResumeWebhook(ctx context.Context, id, actor string, at time.Time) error
}

// Outbox is what a Worker needs of the storage: the webhooks due for a
// delivery, each leased to one worker at a time, and the record of each
// attempt.
type Outbox interface {
	// ClaimWebhooks leases at most limit active webhooks that are due at
	// now, whose lease is free or expired, and have an event after their
	// cursor, to owner until now+lease, each with its next event that it
	// wants; events it does not want are skipped (the cursor moves past
	// them). With several processes on one database, a webhook is held by
	// one owner at a time.
	ClaimWebhooks(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]Claim, error)
	// FinishWebhook records an attempt (o.Delivery, into the log, which
	// keeps DeliveryKept entries per webhook) and, when owner
	// still holds the webhook's lease, sets its new state and frees the
	// lease; it reports whether it did. A webhook deleted meanwhile is
	// not an error (false).
	FinishWebhook(ctx context.Context, owner, id string, o Outcome) (bool, error)
}

// Backoff is the wait after the failures-th failed attempt in a row
// (failures >= 1): RetryBase, doubled for each failure after the
// first.
func Backoff(failures int) time.Duration {
	if failures < 1 {
		return 0
	}
	return RetryBase << min(failures-1, 20)
}

// Outcome returns what becomes of webhook h after an attempt d to deliver
// event e at time now: on success its cursor moves to e; on failure it is
// tried again after Backoff, or paused at MaxFailures.
func (h Hook) Outcome(e audit.Event, d Delivery, now time.Time) Outcome {
	d.Webhook, d.EventID, d.EventKind, d.Attempt = h.ID, e.ID, e.Kind, h.Failures+1
	if d.Time.IsZero() {
		d.Time = now
	}
	if d.OK() {
		return Outcome{Delivery: d, Cursor: e.ID, NextAttempt: now}
	}
	o := Outcome{Delivery: d, Cursor: h.Cursor, Failures: h.Failures + 1, FirstFailure: h.FirstFailure}
	if o.FirstFailure == nil {
		o.FirstFailure = &now
	}
	o.NextAttempt = now.Add(Backoff(o.Failures))
	if o.Failures >= MaxFailures {
		// d.Error, never d.Detail: the pause reaches the audit trail.
		o.Pause = fmt.Sprintf("%d failed attempts in a row since %s, the last: %s", o.Failures, o.FirstFailure.UTC().Format(time.RFC3339), d.Error)
	}
	return o
}

// Site is the scheme and host of a webhook's URL, for the audit
// trail, which viewers read: "https://hooks.slack.com/…". A URL's path and
// query may be its secret (chat services' incoming webhooks are).
func Site(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(a webhook)"
	}
	site := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		site += "/…"
	}
	return site
}

// PausedEvent is the audit event that tells the admin that webhook
// h was paused for reason.
func PausedEvent(h Hook, reason string, at time.Time) audit.Event {
	return audit.Event{Time: at, Actor: "webhook delivery", Kind: audit.WebhookPaused, Subject: h.ID,
		Summary: fmt.Sprintf("paused webhook %s: %s; resume it once the endpoint works (POST /api/webhooks/%s/resume)", Site(h.URL), reason, h.ID)}
}

// NewHook validates a webhook an admin registers and returns it, with
// a new secret when secret is "" (the only time it is shown), active and
// due at once. Errors: EInvalid.
func NewHook(rawURL, secret string, events []string, by string, now time.Time) (Hook, error) {
	if err := ValidateURL(rawURL); err != nil {
		return Hook{}, err
	}
	if secret == "" {
		b := make([]byte, 32)
		rand.Read(b)
		secret = "whsec_" + hex.EncodeToString(b)
	}
	if n := len(secret); n < MinSecret || n > MaxSecret {
		return Hook{}, feature.Errorf(feature.EInvalid, "a webhook secret has %d to %d bytes: got %d (leave it out to have one made)", MinSecret, MaxSecret, n)
	}
	for _, r := range secret {
		if r < 0x21 || r > 0x7e {
			return Hook{}, feature.Errorf(feature.EInvalid, "a webhook secret is printable ASCII without spaces")
		}
	}
	if len(events) == 0 {
		events = []string{"*"}
	}
	if len(events) > MaxEvents {
		return Hook{}, feature.Errorf(feature.EInvalid, "a webhook lists at most %d kinds of events: got %d (use [\"*\"] for all)", MaxEvents, len(events))
	}
	for _, k := range events {
		if k != "*" && !slices.Contains(eventNames, k) && !audit.Kind(k).Valid() {
			return Hook{}, feature.Errorf(feature.EInvalid, "%q is not a kind of audit event: use \"*\", %s or some of %s", truncate(k, 40), strings.Join(eventNames, ", "), audit.KindNames())
		}
	}
	slices.Sort(events)
	events = slices.Compact(events)
	return Hook{ID: uuid.NewString(), URL: rawURL, Secret: secret, Events: events, CreatedAt: now, CreatedBy: by,
		State: Active, NextAttempt: now}, nil
}

// ValidateURL checks a webhook's URL: absolute http or https, with
// a host, no user name or password, no fragment, at most MaxURL
// bytes. Any host is allowed, loopback and private addresses included:
// only admins register webhooks (see docs/operations.md on SSRF).
func ValidateURL(raw string) error {
	if len(raw) > MaxURL {
		return feature.Errorf(feature.EInvalid, "a webhook URL has at most %d bytes: got %d", MaxURL, len(raw))
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return feature.Errorf(feature.EInvalid, "the webhook URL is not a URL: %s", truncate(raw, 80))
	case u.Scheme != "http" && u.Scheme != "https":
		return feature.Errorf(feature.EInvalid, "a webhook URL is http:// or https://: got %q", truncate(raw, 80))
	case u.Host == "" || u.Hostname() == "":
		return feature.Errorf(feature.EInvalid, "the webhook URL names no host: %q", truncate(raw, 80))
	case u.User != nil:
		return feature.Errorf(feature.EInvalid, "a webhook URL carries no user name or password: sign deliveries with the secret instead")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return feature.Errorf(feature.EInvalid, "a webhook URL has no #fragment")
	}
	return nil
}

// Payload is the JSON body delivered for an event: the event's
// fields, its event name for change requests ("event":
// "request.created" or "request.decided"), and a Slack-compatible
// "text" saying it in words.
type Payload struct {
	audit.Event
	Name string `json:"event,omitempty"`
	Text string `json:"text"`
}

// Body returns the body delivered for e.
func Body(e audit.Event) []byte {
	b, err := json.Marshal(Payload{Event: e, Name: EventName(e.Kind), Text: Text(e)})
	if err != nil { // an audit.Event always marshals
		panic(err)
	}
	return b
}

// Text says what e records in one line of words: "alice changed
// checkout: treatment 50 % → 10 %; … (comment: …)".
func Text(e audit.Event) string {
	if t := requestText(e); t != "" {
		return t
	}
	var b strings.Builder
	b.WriteString(e.Actor)
	b.WriteString(" ")
	b.WriteString(strings.ReplaceAll(string(e.Kind), "_", " "))
	if e.Feature != "" {
		b.WriteString(" " + e.Feature)
		if e.Version > 0 {
			fmt.Fprintf(&b, " (version %d)", e.Version)
		}
		if e.Environment != "" && e.Environment != "production" {
			b.WriteString(" in " + e.Environment)
		}
	}
	if e.Summary != "" {
		b.WriteString(": " + e.Summary)
	}
	if e.Comment != "" {
		b.WriteString(` — "` + e.Comment + `"`)
	}
	return b.String()
}

// requestText says a change request's event for a team's chat: who asks
// for what, or who decided it; "" for other events. Its summary reads
// "request by AUTHOR: what it does".
func requestText(e audit.Event) string {
	author, what, ok := strings.Cut(strings.TrimPrefix(e.Summary, "request by "), ": ")
	if !ok || !strings.HasPrefix(e.Summary, "request by ") {
		return ""
	}
	var b strings.Builder
	switch e.Kind {
	case audit.RequestCreate:
		fmt.Fprintf(&b, "%s asks for approval of a change to %s: %s.", e.Actor, e.Feature, what)
		if e.Comment != "" {
			b.WriteString(` "` + e.Comment + `"`)
		}
		b.WriteString(" Approve or reject it in the dashboard's inbox (/ui/inbox).")
		return b.String()
	case audit.RequestApprove:
		fmt.Fprintf(&b, "%s approved %s's change to %s", e.Actor, author, e.Feature)
		if e.Version > 0 {
			fmt.Fprintf(&b, ", applied as version %d", e.Version)
		}
		b.WriteString(": " + strings.ReplaceAll(what, " would move", " moved") + ".")
	case audit.RequestReject:
		fmt.Fprintf(&b, "%s rejected %s's change to %s: %s.", e.Actor, author, e.Feature, what)
	case audit.RequestCancel:
		fmt.Fprintf(&b, "%s withdrew their change to %s: %s.", e.Actor, e.Feature, what)
	default:
		return ""
	}
	if e.Comment != "" {
		b.WriteString(` "` + e.Comment + `"`)
	}
	return b.String()
}

// Signature is the X-Rollout-Signature header of a delivery of body
// signed with secret: "sha256=" and the hex HMAC-SHA256 of the body.
func Signature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Hooks is what admins do with webhooks, over a store, at the time of
// a clock: what the API and the dashboard call. It is safe for concurrent
// use.
type Hooks struct {
	store Store
	now   func() time.Time
}

// NewHooks returns the webhooks of store; a nil clock is time.Now.
func NewHooks(store Store, now func() time.Time) *Hooks {
	if now == nil {
		now = time.Now
	}
	return &Hooks{store: store, now: now}
}

// maxHookID bounds the IDs looked up: longer ones name no webhook.
const maxHookID = 64

// Create registers a webhook for rawURL (see NewHook) by actor and
// returns it with its secret, shown this once. Errors: EInvalid, EConflict
// when MaxHooks exist, the store's.
func (w *Hooks) Create(ctx context.Context, rawURL, secret string, events []string, actor string) (Hook, error) {
	h, err := NewHook(rawURL, secret, events, actor, w.now())
	if err != nil {
		return Hook{}, err
	}
	return w.store.CreateWebhook(ctx, h)
}

// List returns every webhook, oldest first.
func (w *Hooks) List(ctx context.Context) ([]Hook, error) { return w.store.Webhooks(ctx) }

// Get returns webhook id and its latest attempts, newest first, at most
// DeliveryKept. ENotFound when there is none.
func (w *Hooks) Get(ctx context.Context, id string) (Hook, []Delivery, error) {
	if len(id) > maxHookID {
		return Hook{}, nil, feature.Errorf(feature.ENotFound, "no webhook has ID %q", truncate(id, 40))
	}
	h, err := w.store.Webhook(ctx, id)
	if err != nil {
		return Hook{}, nil, err
	}
	log, err := w.store.WebhookDeliveries(ctx, id, DeliveryKept)
	return h, log, err
}

// Delete removes webhook id, by actor. ENotFound when there is none.
func (w *Hooks) Delete(ctx context.Context, id, actor string) error {
	if len(id) > maxHookID {
		return feature.Errorf(feature.ENotFound, "no webhook has ID %q", truncate(id, 40))
	}
	return w.store.DeleteWebhook(ctx, id, actor, w.now())
}

// Resume makes paused webhook id active again, by actor: delivery goes on
// from the event it stopped at. ENotFound, EConflict when it is not paused.
func (w *Hooks) Resume(ctx context.Context, id, actor string) error {
	if len(id) > maxHookID {
		return feature.Errorf(feature.ENotFound, "no webhook has ID %q", truncate(id, 40))
	}
	return w.store.ResumeWebhook(ctx, id, actor, w.now())
}

// truncate shortens s to n bytes and "…" for a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
