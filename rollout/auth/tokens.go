// Package auth is who may do what in rollout: API tokens, their roles and
// the permissions those allow, and the dashboard's sessions that signed
// out. Only the SHA-256 of a token's secret is kept. Tokens authenticates
// secrets from memory, never the store, and follows the tokens' changes;
// package api checks each request's token (and signs the dashboard's
// sessions) with it, package store keeps the tokens (Store), and the
// change pipeline (package rollout) holds editors' changes, by their Role,
// to the organisation's settings.
//
// The package's files: role.go (Role, Permission: what each role allows),
// tokens.go (Token, its secret and hash, Store, and Tokens) and
// sessions.go (Session: a person's single sign-on session, kept like a
// token so that it expires and is revoked). It imports neither HTTP nor
// SQL.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rollout/rollout/rollout/feature"
)

// Token is an API token. Only the SHA-256 of its secret is kept.
type Token struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Role      Role       `json:"role"`
	Hash      string     `json:"-"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// CreatedBy is who created the token ("" before it was recorded).
	CreatedBy string `json:"created_by,omitempty"`
	// LastUsedAt is about when the token last authenticated a request
	// (recorded at most once per TokenUseResolution); nil: not since it
	// is recorded.
	LastUsedAt *time.Time `json:"last_used_at"`
	// Environment is the one environment the token sees and changes; ""
	// for every environment. App roles (evaluate, sdk, client) always have
	// one: Production unless another is chosen.
	Environment string `json:"environment,omitempty"`
}

// Production is the environment everything belongs to until others are
// made, and the one app tokens are scoped to by default.
const Production = "production"

// InEnvironment reports whether the token may see the environment env.
func (t Token) InEnvironment(env string) bool {
	return t.Environment == "" || t.Environment == env
}

// TokenUseResolution is how finely a token's last use is recorded: a
// token used all the time costs one write of the store per this period.
const TokenUseResolution = time.Minute

var tokenNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$`)

// Validate reports what is wrong with t's name or role.
func (t Token) Validate() error {
	if !tokenNamePattern.MatchString(t.Name) {
		return feature.Errorf(feature.EInvalid, "token name %q is invalid: use 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', '@', '-'", t.Name)
	}
	if !t.Role.Valid() {
		return feature.Errorf(feature.EInvalid, "role %q is not one of admin, editor, viewer, sdk, client, evaluate", t.Role)
	}
	return nil
}

// NewTokenSecret returns a new random token secret and its hash.
func NewTokenSecret() (secret, hash string) {
	b := make([]byte, 32)
	rand.Read(b)
	secret = "rlt_" + base64.RawURLEncoding.EncodeToString(b)
	return secret, HashToken(secret)
}

// HashToken returns the SHA-256 of a token secret, in hex: what is stored.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Store is what Tokens need of the storage: it keeps API tokens and the
// dashboard sessions that signed out. Each method is atomic; its errors
// are *feature.Error values (ENotFound, EConflict, EUnavailable) or
// failures of the store.
type Store interface {
	// CreateToken stores t and records its audit event (token_create, by
	// t.CreatedBy); EConflict if an active token has its name.
	CreateToken(ctx context.Context, t Token) error
	// Tokens returns every token, revoked ones included, oldest first.
	Tokens(ctx context.Context) ([]Token, error)
	// RevokeToken revokes the active token of that name and records its
	// audit event (token_revoke, by actor); ENotFound if none.
	RevokeToken(ctx context.Context, name string, at time.Time, actor string) error
	// TouchTokens records when tokens were last used, by ID: each
	// token's last_used_at becomes the later of the stored one and the
	// given one. It is no change: no commit, no audit event.
	TouchTokens(ctx context.Context, used map[string]time.Time) error
	// EndSession records that a dashboard session signed out, until it
	// expires; its commit is a token commit keyed SessionCommitKey (the
	// change feed's, which CreateToken and RevokeToken write too), written
	// only when the session was not ended already.
	EndSession(ctx context.Context, id string, expires time.Time) error
	// EndedSessions returns the sessions that signed out and have not
	// expired by now.
	EndedSessions(ctx context.Context, now time.Time) ([]string, error)
	// SweepEndedSessions deletes the ended sessions that expired before
	// now, and returns how many.
	SweepEndedSessions(ctx context.Context, now time.Time) (int, error)
	SessionStore
}

// SessionCommitKey is the key of the token commit that EndSession writes.
const SessionCommitKey = "session"

// Tokens authenticates requests from an in-memory copy of the active
// tokens, refreshed from the store, so that checking a token never reads
// the database. Safe for concurrent use.
type Tokens struct {
	store Store
	now   func() time.Time
	// mu serializes refreshes, each a read of the store and the swap of
	// state, so that a refresh that read the table before a revoke cannot
	// be stored after the refresh that followed the revoke.
	mu    sync.Mutex
	state atomic.Pointer[tokenState]
	uses  map[string]*tokenUse // by token ID; guarded by mu
	// required: Require was called; guarded by mu.
	required bool
}

// tokenUse says whether a token was used since its last use was saved
// (set by Authenticate, an atomic load on its path once set) and when that
// save was, in Unix seconds (by Refresh).
type tokenUse struct {
	dirty atomic.Bool
	saved atomic.Int64
}

// mark notes a use.
func (u *tokenUse) mark() {
	if u != nil && !u.dirty.Load() {
		u.dirty.Store(true)
	}
}

// matchedToken is an entry of tokenState.matched.
type matchedToken struct {
	tok Token
	use *tokenUse
}

// tokenState is one consistent view of the tokens: readers load it once.
type tokenState struct {
	bySum    map[[sha256.Size]byte]Token // the active tokens, by the SHA-256 of their secret
	byID     map[string]Token            // the same, by ID
	ended    map[string]bool             // dashboard sessions that signed out
	sessions map[string]Session          // people's live sessions, by ID
	enforced bool
	// uses are the active tokens' uses, by ID (shared between states).
	uses map[string]*tokenUse
	// changed is closed when a refresh replaces this state (see Changed).
	changed chan struct{}
	// matched holds the secrets Authenticate found in bySum, so that a
	// token used again costs a map look-up rather than a SHA-256 sum:
	// secret → Token. Only active tokens' secrets get in, so it holds at
	// most one entry per token, and a refresh starts a new one.
	matched sync.Map
}

// NewTokens returns the tokens of store, loaded. clock tells when
// dashboard sessions expire (see Now); a nil clock means time.Now.
func NewTokens(ctx context.Context, store Store, clock func() time.Time) (*Tokens, error) {
	if clock == nil {
		clock = time.Now
	}
	t := &Tokens{store: store, now: clock}
	t.state.Store(&tokenState{changed: make(chan struct{})})
	return t, t.Refresh(ctx)
}

// Refresh reloads the active tokens from the store. Once any token has
// existed, tokens stay enforced, whatever a later read says.
func (t *Tokens) Refresh(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	// A failed save of the uses does not keep the tokens from being
	// refreshed: they are saved at the next refresh.
	saveErr := t.saveUses(ctx)
	all, err := t.store.Tokens(ctx)
	if err != nil {
		return err
	}
	ended, err := t.store.EndedSessions(ctx, t.now())
	if err != nil {
		return err
	}
	sessions, err := t.loadSessions(ctx)
	if err != nil {
		return err
	}
	next := &tokenState{
		bySum:    make(map[[sha256.Size]byte]Token, len(all)),
		byID:     make(map[string]Token, len(all)),
		uses:     make(map[string]*tokenUse, len(all)),
		ended:    make(map[string]bool, len(ended)),
		sessions: sessions,
		enforced: t.required || t.state.Load().enforced || len(all) > 0,
		changed:  make(chan struct{}),
	}
	for _, id := range ended {
		next.ended[id] = true
	}
	for _, tok := range all {
		if tok.RevokedAt != nil {
			continue
		}
		next.byID[tok.ID] = tok
		if t.uses == nil {
			t.uses = map[string]*tokenUse{}
		}
		u := t.uses[tok.ID]
		if u == nil {
			u = &tokenUse{}
			if tok.LastUsedAt != nil {
				u.saved.Store(tok.LastUsedAt.Unix())
			}
			t.uses[tok.ID] = u
		}
		next.uses[tok.ID] = u
		// A hash that is not the hex of a SHA-256 sum matches no secret.
		var sum [sha256.Size]byte
		if len(tok.Hash) == hex.EncodedLen(len(sum)) {
			if _, err := hex.Decode(sum[:], []byte(tok.Hash)); err == nil {
				next.bySum[sum] = tok
			}
		}
	}
	close(t.state.Swap(next).changed)
	if saveErr != nil {
		return fmt.Errorf("record when tokens were last used: %w", saveErr)
	}
	return nil
}

// Changed returns a channel closed at the next reload of the tokens
// (Refresh, and Create, Revoke and EndSession, which refresh), whatever it
// changes: holders of a long-lived request, such as a stream, check then
// that its token still allows it.
func (t *Tokens) Changed() <-chan struct{} { return t.state.Load().changed }

// RefreshEvery refreshes the tokens every interval until ctx is done, so
// that tokens created or revoked by another process (the rollout token
// command, another instance) take effect within one interval. Failures go
// to report. It returns when ctx is done; callers wait for that before they
// close the store.
func (t *Tokens) RefreshEvery(ctx context.Context, interval time.Duration, report func(error)) {
	every(ctx, interval, t.Refresh, report)
}

// Enforced reports whether tokens are required: once a first token has been
// created, even if all are revoked since. Until then the API is open (and
// the server listens only on loopback).
func (t *Tokens) Enforced() bool { return t.state.Load().enforced }

// Authenticate returns the active token whose secret is given.
func (t *Tokens) Authenticate(secret string) (Token, bool) {
	st := t.state.Load()
	if m, ok := st.matched.Load(secret); ok {
		m := m.(*matchedToken)
		m.use.mark()
		return m.tok, true
	}
	// HashToken's sum, without its hex string, which every request would
	// allocate.
	tok, ok := st.bySum[sha256.Sum256([]byte(secret))]
	if ok {
		u := st.uses[tok.ID]
		st.matched.Store(strings.Clone(secret), &matchedToken{tok: tok, use: u})
		u.mark()
	}
	return tok, ok
}

// Used notes that the active token id authenticated a request by other
// means than its secret (a dashboard session), for LastUsedAt.
func (t *Tokens) Used(id string) { t.state.Load().uses[id].mark() }

// saveUses writes the uses noted since the last save to the store. The
// caller holds t.mu.
func (t *Tokens) saveUses(ctx context.Context) error {
	var used map[string]time.Time
	now := t.now().UTC().Truncate(time.Second)
	for id, u := range t.uses {
		if u.dirty.Load() && now.Unix()-u.saved.Load() >= int64(TokenUseResolution/time.Second) {
			if used == nil {
				used = map[string]time.Time{}
			}
			used[id] = now
		}
	}
	if len(used) == 0 {
		return nil
	}
	if err := t.store.TouchTokens(ctx, used); err != nil {
		return err
	}
	for id, at := range used {
		// A use noted since the check above is one before now: covered.
		t.uses[id].dirty.Store(false)
		t.uses[id].saved.Store(at.Unix())
	}
	return nil
}

// Create makes a new token and returns it with its secret, which is shown
// this once and never stored.
func (t *Tokens) Create(ctx context.Context, name string, role Role, now time.Time) (Token, string, error) {
	return t.CreateBy(ctx, name, role, now, "")
}

// CreateBy is Create, recording actor as the token's creator in the token
// and its audit event ("": "command line").
func (t *Tokens) CreateBy(ctx context.Context, name string, role Role, now time.Time, actor string) (Token, string, error) {
	return t.CreateIn(ctx, name, role, "", now, actor)
}

// CreateIn is CreateBy for a token scoped to the environment env ("": every
// environment, or Production for an app role), which the caller has
// checked exists.
func (t *Tokens) CreateIn(ctx context.Context, name string, role Role, env string, now time.Time, actor string) (Token, string, error) {
	if actor == "" {
		actor = CommandLineActor
	}
	if env == "" && role.App() {
		env = Production
	}
	secret, hash := NewTokenSecret()
	tok := Token{ID: uuid.NewString(), Name: name, Role: role, Hash: hash, CreatedAt: now.UTC(), CreatedBy: actor, Environment: env}
	if err := tok.Validate(); err != nil {
		return Token{}, "", err
	}
	if err := t.store.CreateToken(ctx, tok); err != nil {
		return Token{}, "", err
	}
	return tok, secret, t.Refresh(ctx)
}

// Revoke revokes the active token of that name.
func (t *Tokens) Revoke(ctx context.Context, name string, now time.Time) error {
	return t.RevokeBy(ctx, name, now, "")
}

// CommandLineActor is the actor of token changes made without one: the
// rollout token command.
const CommandLineActor = "command line"

// RevokeBy is Revoke, recording actor in its audit event ("": "command
// line").
func (t *Tokens) RevokeBy(ctx context.Context, name string, now time.Time, actor string) error {
	if actor == "" {
		actor = CommandLineActor
	}
	if err := t.store.RevokeToken(ctx, name, now.UTC(), actor); err != nil {
		return err
	}
	return t.Refresh(ctx)
}

// List returns every token, revoked ones included.
func (t *Tokens) List(ctx context.Context) ([]Token, error) { return t.store.Tokens(ctx) }

// ByID returns the active token with that ID.
func (t *Tokens) ByID(id string) (Token, bool) {
	tok, ok := t.state.Load().byID[id]
	return tok, ok
}

// EndSession records that the dashboard session id signed out, so that it
// no longer works here or, once they refresh, on other instances.
func (t *Tokens) EndSession(ctx context.Context, id string, expires time.Time) error {
	if err := t.store.EndSession(ctx, id, expires); err != nil {
		return err
	}
	return t.Refresh(ctx)
}

// DefaultSessionSweep is how often SweepSessionsEvery deletes the ended
// sessions that have expired.
const DefaultSessionSweep = time.Hour

// SweepSessionsEvery deletes the ended dashboard sessions that have
// expired, every interval (0: DefaultSessionSweep) until ctx is done, so
// that their rows do not wait for the next sign-out. Failures go to report.
func (t *Tokens) SweepSessionsEvery(ctx context.Context, interval time.Duration, report func(error)) {
	if interval <= 0 {
		interval = DefaultSessionSweep
	}
	every(ctx, interval, func(ctx context.Context) error {
		_, err := t.store.SweepEndedSessions(ctx, t.now())
		return err
	}, report)
}

// Now returns the time of the tokens' clock, which dashboard sessions are
// signed and checked by.
func (t *Tokens) Now() time.Time { return t.now() }

// SessionEnded reports whether the dashboard session id signed out.
func (t *Tokens) SessionEnded(id string) bool { return t.state.Load().ended[id] }

// every runs do at every interval until ctx is done: the loop of the
// tokens' background jobs, which run on their caller's goroutine. do's
// failures go to report (nil drops them), but not those that come of ctx
// ending.
func every(ctx context.Context, interval time.Duration, do func(context.Context) error, report func(error)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := do(ctx); err != nil && ctx.Err() == nil && report != nil {
				report(err)
			}
		}
	}
}
