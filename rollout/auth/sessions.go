package auth

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/feature"
)

// Session is a person's dashboard session, begun by signing in with single
// sign-on (OpenID Connect). Unlike a token's session it is stored, so that
// admins can list and revoke it; it acts with Role as Actor().
type Session struct {
	ID string `json:"id"`
	// Person is who signed in: their e-mail address, else their user name
	// or subject at the provider.
	Person string `json:"person"`
	// Subject is the provider's stable identifier of the person.
	Subject string `json:"subject"`
	Role    Role   `json:"role"`
	// Environment, when not "", is the one environment the role is
	// granted in, as a scoped token's (Token.Environment).
	Environment string     `json:"environment,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   time.Time  `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
	RevokedBy   string     `json:"revoked_by,omitempty"`
}

// SSOSuffix ends the actor of a person signed in with single sign-on.
const SSOSuffix = " via sso"

// Actor is the name the audit trail, change requests and approvals give
// the person: "ann@example.com via sso".
func (s Session) Actor() string { return s.Person + SSOSuffix }

// SessionTokenPrefix starts the Token.ID of a person's session (see
// Session.Token), which no API token's ID does.
const SessionTokenPrefix = "sso:"

// Token is the session as the token a request is made with: its ID is
// SessionTokenPrefix and the session's, its name the person's Actor.
func (s Session) Token() Token {
	return Token{ID: SessionTokenPrefix + s.ID, Name: s.Actor(), Role: s.Role, Environment: s.Environment, CreatedAt: s.CreatedAt, CreatedBy: "sso"}
}

// Bounds of a session's fields, which come from the identity provider.
const (
	MaxPersonBytes  = 254 // an e-mail address at most
	MaxSubjectBytes = 255 // OpenID Connect's bound of sub
)

// Validate reports what is wrong with s.
func (s Session) Validate() error {
	switch {
	case s.Person == "" || len(s.Person) > MaxPersonBytes || strings.ContainsAny(s.Person, "\x00\r\n"):
		return feature.Errorf(feature.EInvalid, "the person's name must be 1 to %d bytes on one line", MaxPersonBytes)
	case s.Subject == "" || len(s.Subject) > MaxSubjectBytes:
		return feature.Errorf(feature.EInvalid, "the subject must be 1 to %d bytes", MaxSubjectBytes)
	case !s.Role.Valid() || !s.Role.Allows(PermRead) || s.Role == RoleSDK || s.Role == RoleEvaluate:
		return feature.Errorf(feature.EInvalid, "a person's role is admin, editor or viewer, not %q", s.Role)
	case !s.ExpiresAt.After(s.CreatedAt):
		return feature.Errorf(feature.EInvalid, "a session must expire after it begins")
	}
	return nil
}

// SessionStore is what Tokens need of the storage to keep people's
// sessions (see Store). Its methods are atomic; each that changes a session
// writes a token commit, so that other instances refresh.
type SessionStore interface {
	// CreateSession stores s and records its audit event (session_create,
	// by s.Actor()).
	CreateSession(ctx context.Context, s Session) error
	// Sessions returns the sessions that are not revoked and expire after
	// now, oldest first.
	Sessions(ctx context.Context, now time.Time) ([]Session, error)
	// RevokeSession revokes the live session id and records its audit
	// event (session_revoke, by actor); ENotFound if no live session has
	// that ID.
	RevokeSession(ctx context.Context, id string, at time.Time, actor string) error
}

// StartSession stores a new session of person (subject at the provider)
// with role, lasting lifetime from now, and returns it.
func (t *Tokens) StartSession(ctx context.Context, person, subject string, role Role, lifetime time.Duration) (Session, error) {
	return t.StartSessionIn(ctx, person, subject, role, "", lifetime)
}

// StartSessionIn is StartSession with the role granted in the environment
// env alone ("": every environment).
func (t *Tokens) StartSessionIn(ctx context.Context, person, subject string, role Role, env string, lifetime time.Duration) (Session, error) {
	now := t.now().UTC().Truncate(time.Second)
	s := Session{ID: rand.Text(), Person: person, Subject: subject, Role: role, Environment: env, CreatedAt: now, ExpiresAt: now.Add(lifetime)}
	if err := s.Validate(); err != nil {
		return Session{}, err
	}
	if err := t.store.CreateSession(ctx, s); err != nil {
		return Session{}, err
	}
	return s, t.Refresh(ctx)
}

// Session returns the live session id: stored, not revoked, not expired.
func (t *Tokens) Session(id string) (Session, bool) {
	s, ok := t.state.Load().sessions[id]
	if !ok || !t.now().Before(s.ExpiresAt) {
		return Session{}, false
	}
	return s, true
}

// Sessions returns the live sessions.
func (t *Tokens) Sessions(ctx context.Context) ([]Session, error) {
	return t.store.Sessions(ctx, t.now())
}

// RevokeSession revokes the live session id, recording actor in its audit
// event: the session no longer works here, nor, once they refresh, on
// other instances.
func (t *Tokens) RevokeSession(ctx context.Context, id string, actor string) error {
	if actor == "" {
		actor = CommandLineActor
	}
	if err := t.store.RevokeSession(ctx, id, t.now().UTC(), actor); err != nil {
		return err
	}
	return t.Refresh(ctx)
}

// Require makes tokens or sessions needed from now on, even before any
// token exists: a server whose people sign in with single sign-on is never
// open.
func (t *Tokens) Require() {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.state.Load()
	next := &tokenState{bySum: st.bySum, byID: st.byID, ended: st.ended, sessions: st.sessions, enforced: true,
		uses: st.uses, changed: make(chan struct{})}
	t.required = true
	close(t.state.Swap(next).changed)
}

// loadSessions reads the live sessions for a refresh.
func (t *Tokens) loadSessions(ctx context.Context) (map[string]Session, error) {
	all, err := t.store.Sessions(ctx, t.now())
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	m := make(map[string]Session, len(all))
	for _, s := range all {
		m[s.ID] = s
	}
	return m, nil
}
