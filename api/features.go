package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api/evaluation"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/environment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/request"
)

// featureView is a feature as the API shows it: its configuration and the
// exact share of users each bucket of its ring gets.
type featureView struct {
	feature.Feature
	// Rules and BucketBy are always there (rules as [] when none), unlike
	// in the feature's own JSON: see newView.
	Rules    []feature.Rule     `json:"rules"`
	BucketBy string             `json:"bucket_by"`
	Shares   map[string]float64 `json:"shares"`
	// Environment is the environment whose configuration it is, where
	// the answer is about one (GET /api/features, /api/features/K).
	Environment string `json:"environment,omitempty"`
}

// newView is the view of f with those shares.
func newView(f feature.Feature, shares map[string]float64) featureView {
	rules := f.Rules
	if rules == nil {
		rules = []feature.Rule{}
	}
	return featureView{Feature: f, Rules: rules, BucketBy: f.BucketBy, Shares: shares}
}

// viewOf returns the view of the feature key in snap.
func viewOf(snap *feature.Snapshot, key string) (featureView, bool) {
	f, ok := snap.Feature(key)
	if !ok {
		return featureView{}, false
	}
	shares, _ := snap.Shares(key)
	return newView(f, shares), true
}

// archivedView is an archived feature as GET /api/features?archived=true
// lists it.
type archivedView struct {
	featureView
	Archived bool `json:"archived"`
	// ArchivedBy, ArchivedAt and ArchiveComment are who archived it, when
	// and why: its latest archive event (none for a feature archived
	// before the audit trail was kept).
	ArchivedBy     string     `json:"archived_by,omitempty"`
	ArchivedAt     *time.Time `json:"archived_at,omitempty"`
	ArchiveComment string     `json:"archive_comment,omitempty"`
}

// changeResponse answers every mutation.
type changeResponse struct {
	Feature featureView    `json:"feature"`
	Report  feature.Report `json:"report"`
	DryRun  bool           `json:"dry_run"`
	// Request is the change request an editor's change became where
	// approvals are required (status 202): nothing was applied, Feature
	// and Report are its preview.
	Request *request.Request `json:"request,omitempty"`
	// Needs, in an editor's dry run, is what the change would need:
	// "approval" or "admin"; absent when it would apply.
	Needs string `json:"needs,omitempty"`
	// Elsewhere is what an archive or a restore does in the other
	// environments, which it archives or restores too.
	Elsewhere []environment.Effect `json:"elsewhere,omitempty"`
	// Unchanged: nothing differed, and no version was written (a
	// promotion of a feature alike already).
	Unchanged bool `json:"unchanged,omitempty"`
}

// guards are the options every mutation takes in its body as well as in its
// query: ?dry_run=true&max_churn=0.25.
type guards struct {
	DryRun   *bool    `json:"dry_run"`
	MaxChurn *float64 `json:"max_churn"`
	// Submit: an editor's change that the settings refuse (above the
	// churn limit, a reshuffle) becomes a change request instead.
	Submit *bool `json:"submit"`
	// Comment is stored with the change's version (body only).
	Comment string `json:"comment"`
}

// listFeatures is GET /api/features: the served features; with
// ?archived=true, the archived ones instead (each with the shares it would
// serve if restored, and "archived": true).
func (s *Server) listFeatures(c echo.Context) error {
	switch a := c.QueryParam("archived"); a {
	case "", "false":
	case "true":
		fs, err := s.in(c).ArchivedFeatures(c.Request().Context())
		if err != nil {
			return err
		}
		out := make([]archivedView, len(fs))
		for i, f := range fs {
			out[i] = archivedView{featureView: featureView{Feature: f, Shares: f.Ring().Shares()}, Archived: true}
			es, err := s.svc.AuditEvents(c.Request().Context(), audit.Query{Feature: f.Key, Kind: audit.Archive, Limit: 1})
			if err != nil {
				return err
			}
			if len(es) == 1 && (es[0].FeatureID == "" || es[0].FeatureID == f.ID) {
				out[i].ArchivedBy, out[i].ArchivedAt, out[i].ArchiveComment = es[0].Actor, &es[0].Time, es[0].Comment
			}
		}
		return c.JSON(http.StatusOK, map[string]any{"features": out})
	default:
		return badRequest("archived=%q: give archived=true to list the archived features, or leave it out", a)
	}
	snap := s.in(c).Snapshot()
	out := make([]featureView, 0, snap.Len())
	for _, key := range snap.Keys() {
		if v, ok := viewOf(snap, key); ok {
			v.Environment = s.in(c).Environment()
			out = append(out, v)
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"features": out, "environment": s.in(c).Environment()})
}

func (s *Server) getFeature(c echo.Context) error {
	key := c.Param("key")
	v, ok := viewOf(s.in(c).Snapshot(), key)
	if !ok {
		if _, err := s.in(c).ArchivedFeature(c.Request().Context(), key); err == nil {
			return feature.Errorf(feature.ENotFound, "feature %q is archived: restore it (POST /api/features/%s/restore) to serve it again; GET /api/features?archived=true lists the archived features", key, key)
		}
		return feature.Errorf(feature.ENotFound, "feature %q does not exist", key)
	}
	c.Response().Header().Set("ETag", etag(v.Feature))
	v.Environment = s.in(c).Environment()
	return c.JSON(http.StatusOK, v)
}

type bucketRequest struct {
	Name     string          `json:"name"`
	Replicas *int            `json:"replicas"`
	Value    json.RawMessage `json:"value"`
}

func (b bucketRequest) bucket() feature.Bucket {
	out := feature.Bucket{Name: b.Name, Replicas: feature.DefaultReplicas, Value: b.Value}
	if b.Replicas != nil {
		out.Replicas = *b.Replicas
	}
	if string(b.Value) == "null" {
		out.Value = nil
	}
	return out
}

func buckets(reqs []bucketRequest) []feature.Bucket {
	out := make([]feature.Bucket, len(reqs))
	for i, b := range reqs {
		out[i] = b.bucket()
	}
	return out
}

type createRequest struct {
	Key         string            `json:"key"`
	Description string            `json:"description"`
	Enabled     *bool             `json:"enabled"`
	Salt        *string           `json:"salt"`
	Fallback    string            `json:"fallback"`
	Buckets     []bucketRequest   `json:"buckets"`
	Overrides   map[string]string `json:"overrides"`
	Rules       []feature.Rule    `json:"rules"`
	BucketBy    string            `json:"bucket_by"`
	// Prerequisites: see prerequisites.go.
	Prerequisites []feature.Prerequisite `json:"prerequisites"`
	// Targets, instead of the buckets' replicas, asks for shares: the
	// replicas come from a plan (see plannedBuckets).
	Targets   map[string]float64 `json:"targets"`
	Tolerance *float64           `json:"tolerance"`
	Mode      string             `json:"mode"` // as a plan's; any mode plans a fine ring
	Tags      []string           `json:"tags"`
	Owner     string             `json:"owner"`
	guards
}

// createFeature is POST /api/features. The feature is enabled unless the
// request says otherwise, and its salt is its key unless given.
func (s *Server) createFeature(c echo.Context) error {
	var req createRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	opts, err := changeOptions(c, req.guards)
	if err != nil {
		return err
	}
	f := feature.Feature{
		Key: req.Key, Description: req.Description, Enabled: true, Salt: req.Key,
		Fallback: req.Fallback, Buckets: buckets(req.Buckets), Overrides: req.Overrides,
		Tags: slices.Sorted(slices.Values(req.Tags)), Owner: req.Owner,
		Rules: req.Rules, BucketBy: req.BucketBy, Prerequisites: req.Prerequisites,
	}
	if len(f.Rules) == 0 {
		f.Rules = nil
	}
	if err := f.ValidateTargeting(); err != nil {
		return err // before a plan of targets, which may take long
	}
	if req.Targets != nil {
		if f.Buckets, err = s.plannedBuckets(c, req); err != nil {
			return err
		}
	} else if req.Tolerance != nil || req.Mode != "" {
		return badRequest("tolerance is for targets, and so is mode: give targets too, or neither")
	}
	if req.Enabled != nil {
		f.Enabled = *req.Enabled
	}
	if req.Salt != nil {
		f.Salt = *req.Salt
	}
	answer := answers(c, func(res rollout.Result) (keptAnswer, error) {
		if res.DryRun {
			return resultAnswer(http.StatusOK, res)
		}
		return resultAnswer(http.StatusCreated, res)
	})
	opts.Idempotency = answer.idempotency()
	res, err := s.in(c).Create(c.Request().Context(), f, opts)
	if err != nil {
		return err
	}
	s.appliedResult(c, "created", opts, res)
	return answer.send(res)
}

type patchRequest struct {
	Description *string `json:"description"`
	Enabled     *bool   `json:"enabled"`
	Fallback    *string `json:"fallback"`
	BucketBy    *string `json:"bucket_by"`
	labelsRequest
	guards
}

// labelsRequest is the part of a PATCH that sets a feature's tags and owner.
type labelsRequest struct {
	Tags  *[]string `json:"tags"`
	Owner *string   `json:"owner"`
}

// withLabels returns ch and then the change of the request's tags and owner,
// if it names any; ch alone changes nothing when only labels are given.
func (l labelsRequest) withLabels(ch change.Change, others bool) change.Change {
	switch {
	case l.Tags == nil && l.Owner == nil:
		return ch
	case !others:
		return change.SetLabels(l.Tags, l.Owner)
	}
	return change.Combine(ch, change.SetLabels(l.Tags, l.Owner))
}

// patchFeature is PATCH /api/features/K: description, kill switch,
// fallback, tags and owner.
func (s *Server) patchFeature(c echo.Context) error {
	var req patchRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	return s.change(c, req.guards, req.change())
}

// change is the change a PATCH asks for (its body without the guards).
func (req patchRequest) change() change.Change {
	others := req.Description != nil || req.Enabled != nil || req.Fallback != nil || req.BucketBy != nil
	return req.withLabels(patchChange(req), others)
}

// deleteFeature is DELETE /api/features/K: it archives the feature (see
// archive), answering 204 (a dry run 200 with the report). With
// ?purge=true, which needs an admin (the route's QueryAccess), it purges
// an archived feature instead (see purgeFeature).
func (s *Server) deleteFeature(c echo.Context) error {
	if purge := c.QueryParam("purge"); purge != "" && purge != "false" {
		if purge != "true" {
			return badRequest("purge=%q: give purge=true to purge an archived feature, or leave it out to archive", purge)
		}
		return s.purgeFeature(c)
	}
	return s.archive(c, http.StatusNoContent)
}

// archiveFeature is POST /api/features/K/archive: it archives the feature,
// answering 200 with the feature as it was and the report of its
// archiving.
func (s *Server) archiveFeature(c echo.Context) error { return s.archive(c, http.StatusOK) }

// archive stops serving the feature K, keeping it and its history to be
// restored, and answers status (204: no body). An editor's archive of a
// feature under approvals is a change request: 202 with it and its
// preview.
func (s *Server) archive(c echo.Context, status int) error {
	var req guards
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	opts, err := changeOptions(c, req)
	if err != nil {
		return err
	}
	key := c.Param("key")
	answer := answers(c, func(res rollout.Result) (keptAnswer, error) {
		switch {
		case res.DryRun || res.Request != nil:
			return resultAnswer(http.StatusOK, res) // a request: 202
		case status == http.StatusNoContent:
			return keptAnswer{Status: status}, nil
		}
		return resultAnswer(status, res)
	})
	opts.Idempotency = answer.idempotency()
	res, err := s.in(c).Archive(c.Request().Context(), key, opts)
	if err != nil {
		return err
	}
	if !res.DryRun && res.Request == nil {
		s.applied(c, key, res.Feature.Version, "archived", res.Report.Churn, opts.Actor)
	}
	return answer.send(res)
}

// restoreFeature is POST /api/features/K/restore: the archived feature is
// served again with its configuration, as a new version; 200 with the
// feature and the report (users move from no bucket back to theirs). An
// editor's restore of a feature under approvals is a change request: 202
// with it and this preview.
func (s *Server) restoreFeature(c echo.Context) error {
	var req guards
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	opts, err := changeOptions(c, req)
	if err != nil {
		return err
	}
	answer := answers(c, okResult)
	opts.Idempotency = answer.idempotency()
	res, err := s.in(c).Restore(c.Request().Context(), c.Param("key"), opts)
	if err != nil {
		return err
	}
	s.appliedResult(c, "restored", opts, res)
	return answer.send(res)
}

// purgeFeature is DELETE /api/features/K?purge=true: the archived feature,
// its history, exposures and ramps are removed (its audit events stay);
// 204. A feature that is served is not purged: 409.
func (s *Server) purgeFeature(c echo.Context) error {
	var req guards
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	opts, err := changeOptions(c, req)
	if err != nil {
		return err
	}
	if opts.DryRun {
		return badRequest("a purge has no dry run: list the archived features with GET /api/features?archived=true")
	}
	key := c.Param("key")
	answer := answers(c, func(struct{}) (keptAnswer, error) { return keptAnswer{Status: http.StatusNoContent}, nil })
	opts.Idempotency = answer.idempotency()
	if err := s.in(c).Purge(c.Request().Context(), key, opts); err != nil {
		return err
	}
	c.Set(changeKindKey, "purge") // the route's Change is its archive's
	s.applied(c, key, 0, "purged", 0, opts.Actor)
	return answer.send(struct{}{})
}

type addBucketRequest struct {
	bucketRequest
	guards
}

func (s *Server) addBucket(c echo.Context) error {
	var req addBucketRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	return s.change(c, req.guards, change.AddBucket(req.bucket()))
}

type updateBucketRequest struct {
	Replicas *int            `json:"replicas"`
	Value    json.RawMessage `json:"value"`
	guards
}

func (s *Server) updateBucket(c echo.Context) error {
	var req updateBucketRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	return s.change(c, req.guards, change.UpdateBucket(c.Param("name"), req.Replicas, req.Value))
}

func (s *Server) removeBucket(c echo.Context) error {
	var req guards
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	return s.change(c, req, change.RemoveBucket(c.Param("name")))
}

type overrideRequest struct {
	Bucket string `json:"bucket"`
	guards
}

func (s *Server) setOverride(c echo.Context) error {
	var req overrideRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	return s.change(c, req.guards, change.SetOverride(c.Param("user"), req.Bucket))
}

func (s *Server) clearOverride(c echo.Context) error {
	var req guards
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	return s.change(c, req, change.ClearOverride(c.Param("user")))
}

type previewRequest struct {
	Buckets []bucketRequest `json:"buckets"`
	Rules   *[]feature.Rule `json:"rules"`
}

// preview is POST /api/features/K/preview: the churn report of replacing
// the feature's buckets with the given list. Nothing is stored.
func (s *Server) preview(c echo.Context) error {
	var req previewRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	switch {
	case req.Rules != nil && req.Buckets != nil:
		return badRequest(`preview the buckets or the rules, one at a time`)
	case req.Rules != nil:
		return s.previewRules(c, *req.Rules)
	case req.Buckets == nil:
		return badRequest(`give the proposed buckets: {"buckets":[{"name":"A","replicas":100},…]}, or rules: {"rules":[…]}`)
	}
	opts, err := changeOptions(c, guards{})
	if err != nil {
		return err
	}
	opts.DryRun, opts.MaxChurn = true, nil
	res, err := s.in(c).Change(c.Request().Context(), c.Param("key"), change.SetBuckets(buckets(req.Buckets)), opts)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res.Report)
}

type reshuffleRequest struct {
	Salt *string `json:"salt"`
	guards
}

// reshuffle is POST /api/features/K/reshuffle: a new salt, given or random.
func (s *Server) reshuffle(c echo.Context) error {
	var req reshuffleRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	salt := uuid.NewString()
	if req.Salt != nil {
		salt = *req.Salt
	}
	return s.change(c, req.guards, change.Reshuffle(salt))
}

type rollbackRequest struct {
	Version *int `json:"version"`
	// KeepOverrides keeps the feature's current overrides (whose bucket
	// the old version has) instead of the old version's.
	KeepOverrides bool `json:"keep_overrides"`
	guards
}

func (s *Server) rollback(c echo.Context) error {
	var req rollbackRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Version == nil {
		return badRequest(`give the version to roll back to: {"version":N}`)
	}
	opts, err := changeOptions(c, req.guards)
	if err != nil {
		return err
	}
	answer := answers(c, okResult)
	opts.Idempotency = answer.idempotency()
	res, err := s.in(c).RollbackWith(c.Request().Context(), c.Param("key"), *req.Version, rollout.RollbackOptions{KeepOverrides: req.KeepOverrides}, opts)
	if err != nil {
		return err
	}
	s.appliedResult(c, fmt.Sprintf("rolled back to version %d", *req.Version), opts, res)
	return answer.send(res)
}

// History answers are bounded by bytes as well as by count: a page ends
// early, with "next", once its entries take maxHistoryBytes (it lists one
// entry at least, which the feature limits bound). Versions are read from
// the service historyChunk at a time.
const (
	maxHistoryBytes = 1 << 20
	historyChunk    = 100
)

// versionSummary is an entry of a history list: a version without the
// overrides of its configuration (override_count says how many it had) and
// with its report's count of override changes (override_change_count) in
// place of their list. GET /api/features/K/versions/N has both.
type versionSummary struct {
	rollout.Version
	Config configSummary `json:"config"`
	Report reportSummary `json:"report"`
}

type configSummary struct {
	feature.Feature
	// Overrides hides the feature's own, which it never holds: nil, it is
	// left out.
	Overrides *struct{} `json:"overrides,omitempty"`
}

type reportSummary struct {
	feature.Report
	OverrideChangeCount int `json:"override_change_count"`
}

func summarize(v rollout.Version) versionSummary {
	r := reportSummary{Report: v.Report, OverrideChangeCount: len(v.Report.OverrideChanges)}
	r.OverrideChanges = nil
	return versionSummary{Version: v, Config: configSummary{Feature: v.Config}, Report: r}
}

// historyList gathers the encoded entries of one history answer: at most
// limit of them and, past the first, at most maxHistoryBytes.
type historyList struct {
	entries []json.RawMessage
	bytes   int
	limit   int
	full    bool // an entry was left out: another page follows
}

// add appends entry, encoded, unless the list is full; it reports whether
// it did. Once it returns false, it always does.
func (l *historyList) add(entry any) (bool, error) {
	if l.full || len(l.entries) == l.limit {
		l.full = true
		return false, nil
	}
	b, err := json.Marshal(entry)
	if err != nil {
		return false, err
	}
	if len(l.entries) > 0 && l.bytes+len(b) > maxHistoryBytes {
		l.full = true
		return false, nil
	}
	l.entries, l.bytes = append(l.entries, b), l.bytes+len(b)+1
	return true, nil
}

// versionsPage answers GET /api/features/K/versions.
type versionsPage struct {
	Versions []json.RawMessage `json:"versions"` // versionSummary
	Next     *string           `json:"next"`     // the URL of the next page; null on the last
}

// listVersions is GET /api/features/K/versions[?before=N&limit=M]: the
// feature's history, newest first, a page at a time, each version as a
// summary (versionSummary).
func (s *Server) listVersions(c echo.Context) error {
	before, limit, err := historyPage(c)
	if err != nil {
		return err
	}
	l := historyList{entries: []json.RawMessage{}, limit: limit}
	for {
		// One more than the page still holds tells whether another follows.
		want := min(historyChunk, limit-len(l.entries)+1)
		vs, err := s.in(c).Versions(c.Request().Context(), c.Param("key"), before, want)
		if err != nil {
			return err
		}
		for _, v := range vs {
			added, err := l.add(summarize(v))
			if err != nil {
				return err
			}
			if !added {
				return c.JSON(http.StatusOK, versionsPage{Versions: l.entries, Next: nextPage(c, before, limit)})
			}
			before = v.Version
		}
		if len(vs) < want {
			return c.JSON(http.StatusOK, versionsPage{Versions: l.entries})
		}
	}
}

// changeView is one entry of the audit log: a version, as a summary, and
// its feature.
type changeView struct {
	Feature string `json:"feature"`
	versionSummary
}

type changesPage struct {
	Changes []json.RawMessage `json:"changes"` // changeView
	Next    *string           `json:"next"`    // the URL of the next page; null on the last
}

// listChanges is GET /api/changes?feature=K&actor=A&before=SEQ&limit=N: the
// audit log, the versions of every feature newest first, with their
// comments, as summaries, filtered by feature and by actor, a page at a
// time.
func (s *Server) listChanges(c echo.Context) error {
	before, limit, err := historyPage(c)
	if err != nil {
		return err
	}
	q := rollout.ChangeQuery{Feature: c.QueryParam("feature"), Actor: c.QueryParam("actor"), Before: int64(before)}
	l := historyList{entries: []json.RawMessage{}, limit: limit}
	for {
		q.Limit = min(historyChunk, limit-len(l.entries)+1)
		vs, err := s.in(c).Changes(c.Request().Context(), q)
		if err != nil {
			return err
		}
		for _, v := range vs {
			added, err := l.add(changeView{Feature: v.Config.Key, versionSummary: summarize(v)})
			if err != nil {
				return err
			}
			if !added {
				next := url.Values{"before": {strconv.FormatInt(q.Before, 10)}, "limit": {strconv.Itoa(limit)}}
				if q.Feature != "" {
					next.Set("feature", q.Feature)
				}
				if q.Actor != "" {
					next.Set("actor", q.Actor)
				}
				link := c.Request().URL.EscapedPath() + "?" + next.Encode()
				c.Response().Header().Set("Link", "<"+link+`>; rel="next"`)
				return c.JSON(http.StatusOK, changesPage{Changes: l.entries, Next: &link})
			}
			q.Before = v.Seq
		}
		if len(vs) < q.Limit {
			return c.JSON(http.StatusOK, changesPage{Changes: l.entries})
		}
	}
}

// historyPage reads the page a history read asks for: ?before=N (versions
// below N; all when absent) and ?limit=M (1 to rollout.MaxHistoryPage;
// rollout.DefaultHistoryPage when absent).
func historyPage(c echo.Context) (before, limit int, err error) {
	if before, err = intQuery(c, "before"); err != nil {
		return 0, 0, err
	}
	limit = rollout.DefaultHistoryPage
	if q := c.QueryParam("limit"); q != "" {
		limit, err = strconv.Atoi(q)
		if err != nil || limit < 1 || limit > rollout.MaxHistoryPage {
			return 0, 0, badRequest("limit=%q: give a number of versions from 1 to %d (%d when absent), and follow \"next\" for more", q, rollout.MaxHistoryPage, rollout.DefaultHistoryPage)
		}
	}
	return before, limit, nil
}

// nextPage returns the URL of the page of history after the one that ends
// at version last, and sets it as the answer's Link header too.
func nextPage(c echo.Context, last, limit int) *string {
	next := c.Request().URL.EscapedPath() + "?before=" + strconv.Itoa(last) + "&limit=" + strconv.Itoa(limit)
	c.Response().Header().Set("Link", "<"+next+`>; rel="next"`)
	return &next
}

func (s *Server) getVersion(c echo.Context) error {
	n, err := strconv.Atoi(c.Param("version"))
	if err != nil || n < 1 {
		return badRequest("version %q is not a positive integer", c.Param("version"))
	}
	v, err := s.in(c).Version(c.Request().Context(), c.Param("key"), n)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// change applies ch to the feature of the path under the request's guards.
func (s *Server) change(c echo.Context, body guards, ch change.Change) error {
	opts, err := changeOptions(c, body)
	if err != nil {
		return err
	}
	answer := answers(c, okResult)
	opts.Idempotency = answer.idempotency()
	res, err := s.in(c).Change(c.Request().Context(), c.Param("key"), ch, opts)
	if err != nil {
		return err
	}
	s.appliedResult(c, ch.Summary(), opts, res)
	return answer.send(res)
}

// okResult is the answer of a change with its result: 200 (202 for a
// change request; see resultAnswer).
func okResult(res rollout.Result) (keptAnswer, error) { return resultAnswer(http.StatusOK, res) }

// changeOptions reads a mutation's guards from its query, its body and its
// If-Match header. A guard may be given in the query, the body or both;
// given twice with different values (or repeated in the query) it is a 400,
// never settled toward the less safe value.
func changeOptions(c echo.Context, body guards) (rollout.ChangeOptions, error) {
	opts := rollout.ChangeOptions{Actor: actorOf(c), Comment: body.Comment}
	if tok, ok := TokenOf(c); ok {
		opts.Role = tok.Role
	}
	dryRun, err := queryGuard(c, "dry_run", body.DryRun, func(q string) (bool, error) {
		v, err := strconv.ParseBool(q)
		if err != nil {
			return false, badRequest("dry_run=%q: use true or false", q)
		}
		return v, nil
	})
	if err != nil {
		return opts, err
	}
	if dryRun != nil {
		opts.DryRun = *dryRun
	}
	opts.MaxChurn, err = queryGuard(c, "max_churn", body.MaxChurn, func(q string) (float64, error) {
		v, err := strconv.ParseFloat(q, 64)
		if err != nil {
			return 0, badRequest("max_churn=%q is not a number: give a fraction of users between 0 and 1", q)
		}
		return v, nil
	})
	if err != nil {
		return opts, err
	}
	if m := opts.MaxChurn; m != nil {
		if err := feature.CheckMaxChurn(*m); err != nil {
			return opts, badRequest("%s", feature.ErrorMessage(err)) // a bad query or body: 400
		}
	}
	submit, err := queryGuard(c, "submit", body.Submit, func(q string) (bool, error) {
		v, err := strconv.ParseBool(q)
		if err != nil {
			return false, badRequest("submit=%q: use true or false", q)
		}
		return v, nil
	})
	if err != nil {
		return opts, err
	}
	opts.Submit = submit != nil && *submit
	opts.IfMatch, err = ifMatch(c.Request().Header)
	return opts, err
}

// queryGuard returns the guard name from the query (parsed by parse) and
// the body, whichever gave it; nil when neither did.
func queryGuard[T comparable](c echo.Context, name string, body *T, parse func(string) (T, error)) (*T, error) {
	qs := c.QueryParams()[name]
	switch {
	case len(qs) == 0:
		return body, nil
	case len(qs) > 1:
		return nil, badRequest("%s is given %d times in the query: give it once", name, len(qs))
	}
	v, err := parse(qs[0])
	if err != nil {
		return nil, err
	}
	if body != nil && *body != v {
		return nil, badRequest("%s is %v in the query but %v in the body: give one value", name, v, *body)
	}
	return &v, nil
}

// ifMatch returns the tag of the If-Match header: "" when there is none,
// "*" for any. It must be one strong entity tag, quoted; weak or unquoted
// ones are a 400 (a weak tag could never match). A well-formed tag that is
// not the feature's ETag ("3", say) fails the precondition: 412.
func ifMatch(h http.Header) (string, error) {
	vs := h.Values("If-Match")
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", badRequest("If-Match is given %d times: send it once, with the feature's ETag", len(vs))
	case vs[0] == "*":
		return "*", nil
	}
	tag, ok := strings.CutPrefix(vs[0], `"`)
	if ok {
		tag, ok = strings.CutSuffix(tag, `"`)
	}
	if !ok || tag == "" || strings.ContainsAny(tag, "\" \t,") {
		return "", badRequest(`If-Match %q is not one strong entity tag: send the ETag the feature was read with, quoted, such as If-Match: "3-1f0c5a7e2b9d"`, vs[0])
	}
	return tag, nil
}

func intQuery(c echo.Context, name string) (int, error) {
	q := c.QueryParam(name)
	if q == "" {
		return 0, nil
	}
	v, err := strconv.Atoi(q)
	if err != nil || v < 0 {
		return 0, badRequest("%s=%q is not a non-negative integer", name, q)
	}
	return v, nil
}

// etag is the feature's ETag: its Tag, quoted.
func etag(f feature.Feature) string { return `"` + f.Tag() + `"` }

// userHistory is GET /api/features/K/users/U[?before=N&limit=M]: the user's
// bucket now and at every version, newest first, a page at a time.
func (s *Server) userHistory(c echo.Context) error {
	key, user := c.Param("key"), c.Param("user")
	before, limit, err := historyPage(c)
	if err != nil {
		return err
	}
	now, err := s.in(c).Snapshot().Peek(key, user)
	if err != nil {
		return err
	}
	history, next, err := s.in(c).UserHistory(c.Request().Context(), key, user, before, limit)
	if err != nil {
		return err
	}
	page := map[string]any{"feature": key, "user": user, "now": evaluation.JSONOf(now), "versions": history, "next": nil}
	if next != 0 {
		page["next"] = nextPage(c, next, limit)
	}
	return c.JSON(http.StatusOK, page)
}

// exposures is GET /api/features/K/exposures: the evaluations served per
// bucket, observed against exact shares.
func (s *Server) exposures(c echo.Context) error {
	rep, err := s.in(c).Exposures(c.Request().Context(), c.Param("key"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}
