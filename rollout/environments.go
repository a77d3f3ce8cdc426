package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/environment"
	"github.com/rollout/rollout/rollout/feature"
)

// Environments holds a Service per environment, each over the store bound
// to it, and makes the changes that span environments: environments
// created (with every feature, switched off or copied from another),
// changed and deleted, features created everywhere, and promotions. Look
// ups (Service) read an immutable map: nothing is locked on the hot path.
type Environments struct {
	store   EnvironmentStore
	storeIn func(env string) Store
	now     Clock

	mu    sync.Mutex // serializes Refresh and the changes of environments
	state atomic.Pointer[envState]

	// run starts the background work of a service (Run); each runs until
	// its environment is deleted or runCtx ends.
	run     func(ctx context.Context, svc *Service)
	runCtx  context.Context
	cancels map[*Service]context.CancelFunc
	running sync.WaitGroup
}

type envState struct {
	list     []Environment
	services map[string]*Service
}

// NewEnvironments loads the environments of store and a Service for each,
// over storeIn(key). A nil clock means time.Now.
func NewEnvironments(ctx context.Context, store EnvironmentStore, storeIn func(env string) Store, clock Clock) (*Environments, error) {
	e := &Environments{store: store, storeIn: storeIn, now: clock, cancels: map[*Service]context.CancelFunc{}}
	if e.now == nil {
		e.now = time.Now
	}
	e.state.Store(&envState{services: map[string]*Service{}})
	if err := e.Refresh(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// Refresh reads the environments again: services are made for new ones
// and dropped (their background work stopped) for deleted ones.
func (e *Environments) Refresh(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.refreshLocked(ctx)
}

func (e *Environments) refreshLocked(ctx context.Context) error {
	list, err := e.store.Environments(ctx)
	if err != nil {
		return fmt.Errorf("load environments: %w", err)
	}
	old := e.state.Load()
	next := &envState{list: list, services: make(map[string]*Service, len(list))}
	for _, env := range list {
		if svc := old.services[env.Key]; svc != nil {
			next.services[env.Key] = svc
			continue
		}
		svc, err := NewService(ctx, e.storeIn(env.Key), e.now)
		if err != nil {
			return fmt.Errorf("environment %q: %w", env.Key, err)
		}
		svc.env, svc.envs = env.Key, e
		next.services[env.Key] = svc
		e.start(svc)
	}
	for key, svc := range old.services {
		if next.services[key] == nil {
			if cancel := e.cancels[svc]; cancel != nil {
				cancel()
				delete(e.cancels, svc)
			}
		}
	}
	e.state.Store(next)
	return nil
}

// Run starts run for the service of every environment, and of every
// environment made later, each until ctx ends or its environment is
// deleted: the flusher of its exposures, its ramps, its follower.
func (e *Environments) Run(ctx context.Context, run func(ctx context.Context, svc *Service)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.run, e.runCtx = run, ctx
	for _, svc := range e.state.Load().services {
		e.start(svc)
	}
}

// start runs e.run for svc. The caller holds e.mu.
func (e *Environments) start(svc *Service) {
	if e.run == nil || e.cancels[svc] != nil {
		return
	}
	ctx, cancel := context.WithCancel(e.runCtx)
	e.cancels[svc] = cancel
	e.running.Go(func() { e.run(ctx, svc) })
}

// Wait waits for the work Run started to end (its ctx ended).
func (e *Environments) Wait() { e.running.Wait() }

// Service returns the service of the environment key.
func (e *Environments) Service(key string) (*Service, bool) {
	svc, ok := e.state.Load().services[key]
	return svc, ok
}

// Lookup returns the service of the environment key, or ENotFound naming
// it.
func (e *Environments) Lookup(key string) (*Service, error) {
	if svc, ok := e.Service(key); ok {
		return svc, nil
	}
	return nil, environment.Unknown(key)
}

// List returns the environments, by position.
func (e *Environments) List() []Environment { return slices.Clone(e.state.Load().list) }

// Get returns the environment key.
func (e *Environments) Get(key string) (Environment, bool) {
	for _, env := range e.state.Load().list {
		if env.Key == key {
			return env, true
		}
	}
	return Environment{}, false
}

// Services returns the service of every environment, by position.
func (e *Environments) Services() []*Service {
	st := e.state.Load()
	out := make([]*Service, 0, len(st.list))
	for _, env := range st.list {
		out = append(out, st.services[env.Key])
	}
	return out
}

// others returns the services of the environments other than s's; none
// for a service without environments.
func (e *Environments) others(s *Service) []*Service {
	if e == nil {
		return nil
	}
	var out []*Service
	for _, svc := range e.Services() {
		if svc != s {
			out = append(out, svc)
		}
	}
	return out
}

// protected reports whether the environment key is protected; false for
// a service without environments.
func (e *Environments) protected(key string) bool {
	if e == nil {
		return false
	}
	env, ok := e.Get(key)
	return ok && env.Protected
}

// checkDefinition refuses a change of the feature from before to after, in
// the environment of s, whose change of definition the other environments
// cannot take (see package environment): a bucket removed that one of
// them still serves (EConflict); or, for an editor, a value changed of a
// bucket that a protected environment serves (EForbidden), where the
// editor's change would be a request.
func (e *Environments) checkDefinition(s *Service, before, after feature.Feature, editor bool) error {
	if e == nil || !environment.DefinitionDiffers(before, after) {
		return nil
	}
	removed, revalued := environment.Removed(before, after), environment.Revalued(before, after)
	for _, other := range e.others(s) {
		c := other.Snapshot().Compiled(after.Key)
		if c == nil {
			continue
		}
		f := c.Feature()
		for _, name := range removed {
			if uses := environment.InUse(f, name); len(uses) > 0 {
				return feature.Errorf(feature.EConflict, "bucket %q still serves users in environment %s (%s): take them off it there first, since a feature's buckets are the same in every environment", name, other.env, strings.Join(uses, ", "))
			}
		}
		if !editor || !e.protected(other.env) {
			continue
		}
		for _, name := range revalued {
			if environment.Serves(f, name) {
				return feature.Errorf(feature.EForbidden, "bucket %q is served in protected environment %s, and a bucket's value is the same in every environment: change its value there, where an editor's change is a request, or ask an admin", name, other.env)
			}
		}
	}
	return nil
}

// requiresComment reports whether the environment key requires a comment
// on every change; false for a service without environments.
func (e *Environments) requiresComment(key string) bool {
	if e == nil {
		return false
	}
	env, ok := e.Get(key)
	return ok && env.RequireComment
}

// touchesProtected reports whether one of effects is in a protected
// environment.
func (e *Environments) touchesProtected(effects []environment.Effect) bool {
	for _, ef := range effects {
		if ef.Protected {
			return true
		}
	}
	return false
}

// syncOthers brings the services of the environments other than skip's up
// to date with the store, after a write spanning environments committed,
// so that what it wrote there is served at once. The caller holds no
// service's lock. A failure is left to their followers, which sync again.
func (e *Environments) syncOthers(ctx context.Context, skip *Service) {
	for _, svc := range e.others(skip) {
		_, _ = svc.Sync(ctx)
	}
}

// EnvironmentOptions are what a change of an environment takes.
type EnvironmentOptions struct {
	Actor   string
	Comment string
	// CopyFrom, when creating, names the environment whose features'
	// configurations the new one starts with; "": every feature starts
	// switched off (Elsewhere).
	CopyFrom string
}

// Create makes the environment env with every feature: copied from
// opts.CopyFrom's configuration, or switched off with the buckets and
// shares of the first environment.
func (e *Environments) Create(ctx context.Context, env Environment, opts EnvironmentOptions) (Environment, error) {
	if err := env.Validate(); err != nil {
		return Environment{}, err
	}
	if err := validateComment(opts.Comment); err != nil {
		return Environment{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.state.Load()
	if _, ok := st.services[env.Key]; ok {
		return Environment{}, feature.Errorf(feature.EConflict, "environment %q exists already", env.Key)
	}
	from, copying := st.services[opts.CopyFrom], opts.CopyFrom != ""
	switch {
	case copying && from == nil:
		return Environment{}, environment.Unknown(opts.CopyFrom)
	case !copying && len(st.list) > 0:
		from = st.services[st.list[0].Key]
	}
	now := e.now().UTC()
	env.CreatedAt = now
	if env.Position <= 0 && len(st.list) > 0 {
		env.Position = st.list[len(st.list)-1].Position + 1
	}
	var placed []Placed
	if from != nil {
		snap := from.Snapshot()
		for _, key := range snap.Keys() {
			f := snap.Compiled(key).Feature()
			summary := "created in environment " + env.Key + ", switched off"
			if copying {
				summary = "copied from environment " + opts.CopyFrom + " at version " + fmt.Sprint(f.Version)
			} else {
				f = offCopy(f)
			}
			placed = append(placed, place(env.Key, f, snap.CompiledSegments(), now, opts.Actor, summary, opts.Comment))
		}
	}
	summary := fmt.Sprintf("created environment %s (%s) with %d features", env.Key, env.Name, len(placed))
	if copying {
		summary += " copied from " + opts.CopyFrom
	}
	ev := audit.Event{Time: now, Actor: actorName(opts.Actor), Kind: audit.EnvironmentCreate, Subject: env.Key, Summary: summary, Comment: opts.Comment}
	if err := e.store.CreateEnvironment(ctx, env, placed, ev); err != nil {
		return Environment{}, err
	}
	if err := e.refreshLocked(ctx); err != nil {
		return Environment{}, err
	}
	return env, nil
}

// offCopy is the configuration a feature starts with in an environment it
// was not created in: its definition, buckets and shares, switched off,
// without fallback, rules, overrides or bucket_by.
func offCopy(f feature.Feature) feature.Feature {
	f = f.Clone()
	f.Enabled, f.Fallback, f.Rules, f.BucketBy = false, "", nil, ""
	f.Overrides = map[string]string{}
	return f
}

// place returns f as a new feature of the environment env at version 1.
// segments are those its rules use.
func place(env string, f feature.Feature, segments map[string]*feature.CompiledSegment, now time.Time, actor, summary, comment string) Placed {
	f = f.Clone()
	f.ID, f.Version, f.CreatedAt, f.UpdatedAt = uuid.NewString(), 1, now, now
	rep := feature.Compile(f, segments).ReportFrom(nil)
	return Placed{Environment: env, Feature: f, Version: Version{Version: 1, Actor: actorName(actor), Time: now, Summary: summary,
		Comment: comment, Config: f, OverrideCount: len(f.Overrides), Report: rep, Kind: audit.Create}}
}

// elsewhere returns the first versions, switched off, of f, created in
// the environment of s, in every other environment.
func (e *Environments) elsewhere(s *Service, f feature.Feature, v Version) []Placed {
	if e == nil {
		return nil
	}
	var out []Placed
	for _, env := range e.state.Load().list {
		if env.Key == s.env {
			continue
		}
		out = append(out, place(env.Key, offCopy(f), nil, v.Time, v.Actor, "created in environment "+s.env+", switched off here", v.Comment))
	}
	return out
}

// EnvironmentPatch is a change of an environment: the fields given.
type EnvironmentPatch struct {
	Name      *string
	Protected *bool
	// RequireComment: every change there, an admin's included, must
	// say why (ChangeOptions.Comment).
	RequireComment *bool
	Position       *int
}

// Update changes the environment key as p says.
func (e *Environments) Update(ctx context.Context, key string, p EnvironmentPatch, opts EnvironmentOptions) (Environment, error) {
	if err := validateComment(opts.Comment); err != nil {
		return Environment{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	env, ok := e.Get(key)
	if !ok {
		return Environment{}, environment.Unknown(key)
	}
	var what []string
	if p.Name != nil && *p.Name != env.Name {
		what = append(what, fmt.Sprintf("renamed %q", *p.Name))
		env.Name = *p.Name
	}
	if p.RequireComment != nil && *p.RequireComment != env.RequireComment {
		what = append(what, map[bool]string{true: "requires a comment on every change", false: "no longer requires comments"}[*p.RequireComment])
		env.RequireComment = *p.RequireComment
	}
	if p.Protected != nil && *p.Protected != env.Protected {
		what = append(what, map[bool]string{true: "protected", false: "no longer protected"}[*p.Protected])
		env.Protected = *p.Protected
	}
	if p.Position != nil && *p.Position != env.Position {
		what = append(what, fmt.Sprintf("moved to position %d", *p.Position))
		env.Position = *p.Position
	}
	if err := env.Validate(); err != nil {
		return Environment{}, err
	}
	if len(what) == 0 {
		return env, nil
	}
	ev := audit.Event{Time: e.now().UTC(), Actor: actorName(opts.Actor), Kind: audit.EnvironmentChange, Subject: key,
		Summary: "environment " + key + ": " + joinWords(what), Comment: opts.Comment}
	if err := e.store.UpdateEnvironment(ctx, env, ev); err != nil {
		return Environment{}, err
	}
	if err := e.refreshLocked(ctx); err != nil {
		return Environment{}, err
	}
	return env, nil
}

// Delete deletes the environment key (see EnvironmentStore).
func (e *Environments) Delete(ctx context.Context, key string, opts EnvironmentOptions) error {
	if err := validateComment(opts.Comment); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.Get(key); !ok {
		return environment.Unknown(key)
	}
	ev := audit.Event{Time: e.now().UTC(), Actor: actorName(opts.Actor), Kind: audit.EnvironmentDelete, Subject: key,
		Summary: "deleted environment " + key + ": its features' configurations and history are kept", Comment: opts.Comment}
	if err := e.store.DeleteEnvironment(ctx, key, ev); err != nil {
		return err
	}
	return e.refreshLocked(ctx)
}

func actorName(a string) string {
	if a == "" {
		return "anonymous"
	}
	return a
}

func joinWords(ws []string) string {
	out := ""
	for i, w := range ws {
		switch {
		case i == 0:
		case i == len(ws)-1:
			out += " and "
		default:
			out += ", "
		}
		out += w
	}
	return out
}

// OneEnvironment returns environments of svc alone, production, which
// cannot be changed: for a Service used without a store of environments
// (tests, tools). A Service that is already one of environments keeps
// them: they are returned, so that their settings and protection hold.
func OneEnvironment(svc *Service) *Environments {
	if svc.envs != nil {
		return svc.envs
	}
	e := &Environments{store: noEnvironments{}, now: svc.now, cancels: map[*Service]context.CancelFunc{}}
	svc.envs = e
	e.state.Store(&envState{list: []Environment{{Key: svc.env, Name: svc.env}}, services: map[string]*Service{svc.env: svc}})
	return e
}

// noEnvironments is the EnvironmentStore of OneEnvironment.
type noEnvironments struct{}

func (noEnvironments) Environments(context.Context) ([]Environment, error) {
	return nil, errOneEnvironment
}
func (noEnvironments) CreateEnvironment(context.Context, Environment, []Placed, audit.Event) error {
	return errOneEnvironment
}
func (noEnvironments) UpdateEnvironment(context.Context, Environment, audit.Event) error {
	return errOneEnvironment
}
func (noEnvironments) DeleteEnvironment(context.Context, string, audit.Event) error {
	return errOneEnvironment
}

var errOneEnvironment = feature.Errorf(feature.EConflict, "this server has one environment, and no store to keep others in")
