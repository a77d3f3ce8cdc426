package web

import (
	"cmp"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/exposure"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/request"
	"github.com/rollout/rollout/rollout/schedule"
	"github.com/rollout/rollout/rollout/stats"
)

// Bounds on what one page lists.
const (
	historyShown   = 100 // versions on a feature's page
	overridesShown = 100
)

func bucketNames(f feature.Feature) []string {
	names := make([]string, len(f.Buckets))
	for i, b := range f.Buckets {
		names[i] = b.Name
	}
	return names
}

// featurePage is the data of feature.html.
type featurePage struct {
	frame
	Title         string
	Feature       feature.Feature
	Bar           shareBar
	ServedBar     shareBar // what users get now, when the feature is off
	ServedVersion int      // the version whose evaluations "served to apps" counts
	Buckets       []bucketRow
	SampleSize    int
	SampleNone    int         // sampled users served no bucket
	Observed      int64       // users (or evaluations: ObservedUnit) apps got at this version
	ObservedUnit  string      // "users" (distinct, estimated) or "evaluations" (apps that count no users)
	ObservedNone  int64       // of which no bucket
	SRM           *stats.SRM  // the sample-ratio check of ServedVersion's counts, if any
	VersionSRM    []stats.SRM // the checks of every version with counts, newest first
	Mismatches    int         // of which mismatched
	Overrides     []overrideRow
	MoreOverrides int
	Banner        *versionView // the change just applied
	BannerError   string
	Versions      []versionView // newest first
	OlderVersions int           // not listed
	OlderURL      string        // the API's page of them
	Chart         churnChart
	OverTime      sharesChart
	RollbackTo    []rollbackOption
	Lookup        lookupView
	Ramps         []rampView          // newest first
	LiveRamps     []rampView          // of which active or paused, shown with the feature's state
	PastRamps     []rampView          // and the others, done or canceled, further down
	LiveRamp      bool                // one is active or paused: no other can start
	Schedules     []schedule.Schedule // the pending scheduled changes, soonest first (schedules.html)
	PM            pmView              // the header's words for a product manager (pm.go)
	Now           time.Time
	Data          pageData
	// OpenRequests are the feature's change requests waiting for a
	// decision (see requests.go).
	OpenRequests []request.Request
	Targeting    targetingView // rules and bucket_by (targeting.go)
	// Promote is the feature in every environment, and the promote
	// form (environments.go).
	Promote promoteView
}

// rampItem is one ramp on a feature's page, with the page it is on.
type rampItem struct {
	Ramp rampView
	Page *featurePage
}

func rampOf(r rampView, p *featurePage) rampItem { return rampItem{r, p} }

// bucketRow is one bucket in the buckets table.
type bucketRow struct {
	Name         string
	Replicas     int
	Value        string // as JSON
	DefaultValue bool   // the value is the bucket's name
	Share        float64
	Sampled      int   // users of the sample it serves
	Served       int64 // evaluations apps got from it at this version
	Color        int
	Target       string // the target field's first value: its share in percent
}

type overrideRow struct{ User, Bucket string }

type rollbackOption struct {
	Version int
	Label   string
}

// lookupView is the answer to "which bucket does this user get, and at
// every version?"
type lookupView struct {
	Asked  bool
	User   string
	Error  string
	Now    string // the bucket now, or "no bucket"
	Reason string
	Rows   []lookupRow
	// OlderVersions are not listed; OlderURL is the API's page of them.
	OlderVersions int
	OlderURL      string
}

type lookupRow struct {
	Version  int
	Time     time.Time
	Summary  string
	Bucket   string
	Reason   string
	Previous string // the bucket at the version before, when it differs
}

// pageData is what the page's script needs, as JSON.
type pageData struct {
	Key      string       `json:"key"`
	Version  int          `json:"version"`
	Tag      string       `json:"tag"` // for If-Match
	Enabled  bool         `json:"enabled"`
	Fallback string       `json:"fallback"`
	Buckets  []dataBucket `json:"buckets"`
	// LastDay is the distinct users of the last 24 hours (the
	// evaluations when apps counted no users), which the script says in
	// users a day; ChurnLimit is where it escalates a change.
	LastDay    int64   `json:"last_day"`
	ChurnLimit float64 `json:"churn_limit"`
}

type dataBucket struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
	Value    string `json:"value"`
}

// feature is one feature's page: its buckets, the forms that change it, a
// user's look-up and the churn of every change.
func (h *handler) feature(c echo.Context) error {
	ctx := c.Request().Context()
	key := c.Param("key")
	svc := h.in(c)
	snap := svc.Snapshot()
	f, ok := snap.Feature(key)
	if !ok {
		return h.fail(c, http.StatusNotFound, "Feature not found",
			"There is no feature "+strconv.Quote(key)+". It may have been deleted, or the link may be mistyped.")
	}
	shares, _ := snap.Shares(key)
	colour := colors(f)
	p := featurePage{
		Title: f.Key, Feature: f, SampleSize: h.sample,
		Bar:  newBar(bucketNames(f), shares, colour),
		Data: pageData{Key: f.Key, Version: f.Version, Tag: f.Tag(), Enabled: f.Enabled, Fallback: f.Fallback},
	}
	p.Targeting = targeting(snap, f)

	open, err := svc.Requests(ctx, request.Query{State: request.Open, Feature: key, Limit: requestsShown})
	if err != nil {
		return h.internal(c, err)
	}
	p.OpenRequests = open

	counts := sample(snap, key, h.sample)
	p.SampleNone = counts[""]
	served := map[string]int64{}
	exposures, err := svc.Exposures(ctx, key)
	switch {
	case feature.ErrorCode(err) == feature.ENotFound:
		return h.fail(c, http.StatusNotFound, "Feature not found", "Feature "+strconv.Quote(key)+" was deleted a moment ago.")
	case err != nil:
		return h.internal(c, err)
	}
	// Served to apps: distinct users, or evaluations where no app
	// counted users (clients that predate them).
	byUsers := exposures.Users > 0
	if exposures.Total == 0 {
		byUsers = slices.ContainsFunc(exposures.Versions, func(e exposure.Version) bool { return e.Users > 0 })
	}
	p.ObservedUnit = "evaluations"
	if byUsers {
		p.ObservedUnit = "users"
	}
	var observed int64
	for _, b := range exposures.Buckets {
		name := ""
		if b.Bucket != nil {
			name = *b.Bucket
		}
		served[name] = b.Count
		if byUsers {
			served[name] = b.Users
		}
		observed = feature.AddCounts(observed, served[name])
	}
	p.ServedVersion = f.Version
	if exposures.Total == 0 {
		// Nothing served yet at this version: keep the last counts in view.
		for _, e := range exposures.Versions {
			if e.Version < f.Version && e.Count > 0 && (p.ServedVersion == f.Version || e.Version == p.ServedVersion) {
				if p.ServedVersion == f.Version {
					served = map[string]int64{}
				}
				p.ServedVersion = e.Version
				n := e.Count
				if byUsers {
					n = e.Users
				}
				served[e.Bucket] = feature.AddCounts(served[e.Bucket], n)
				observed = feature.AddCounts(observed, n)
			}
		}
	}
	p.Observed, p.ObservedNone = observed, served[""]
	srmOf := map[int]*stats.SRM{}
	for i, r := range exposures.VersionSRM {
		srmOf[r.Version] = &exposures.VersionSRM[i]
		if r.Version == p.ServedVersion {
			p.SRM = &exposures.VersionSRM[i]
		}
		if r.Mismatch {
			p.Mismatches++
		}
	}
	p.VersionSRM = exposures.VersionSRM
	if !f.Enabled && f.Fallback != "" {
		p.ServedBar = newBar([]string{f.Fallback}, map[string]float64{f.Fallback: 1}, colour)
	}
	for _, b := range f.Buckets {
		p.Buckets = append(p.Buckets, bucketRow{
			Name: b.Name, Replicas: b.Replicas, Value: string(b.ServedValue()), DefaultValue: len(b.Value) == 0,
			Share: shares[b.Name], Sampled: counts[b.Name], Served: served[b.Name], Color: colour[b.Name],
		})
		p.Data.Buckets = append(p.Data.Buckets, dataBucket{Name: b.Name, Replicas: b.Replicas, Value: string(b.Value)})
	}
	p.Overrides, p.MoreOverrides = overrideRows(f)
	exact := make([]float64, len(p.Buckets))
	for i, b := range p.Buckets {
		exact[i] = b.Share
	}
	for i, v := range targetValues(exact) {
		p.Buckets[i].Target = v
	}

	versions, err := svc.Versions(ctx, key, 0, historyShown)
	switch {
	case feature.ErrorCode(err) == feature.ENotFound:
		return h.fail(c, http.StatusNotFound, "Feature not found", "Feature "+strconv.Quote(key)+" was deleted a moment ago.")
	case err != nil:
		return h.internal(c, err)
	}
	summaries := map[int]string{}
	for _, v := range versions {
		vv := viewVersion(v)
		vv.SRM = srmOf[v.Version]
		p.Versions = append(p.Versions, vv)
		summaries[v.Version] = rollbackLabel(v)
	}
	if n := len(versions); n > 0 {
		p.OlderVersions = versions[n-1].Version - 1
		p.OlderURL = withEnv("/api/features/"+url.PathEscape(key)+"/versions?before="+strconv.Itoa(versions[n-1].Version), svc.Environment())
	}
	markModulo(p.Versions, versions)
	promote, err := h.promotion(ctx, h.visible(c), svc, f, versions)
	switch {
	case feature.ErrorCode(err) == feature.ENotFound:
		return h.fail(c, http.StatusNotFound, "Feature not found", "Feature "+strconv.Quote(key)+" was deleted a moment ago.")
	case err != nil:
		return h.internal(c, err)
	}
	p.Promote = promote
	p.Chart = newChart(p.Versions)
	p.OverTime = newSharesChart(f, versions, time.Now())
	for n := f.Version - 1; n >= 1; n-- {
		label := "version " + strconv.Itoa(n)
		if s, ok := summaries[n]; ok {
			label += ": " + s
		}
		p.RollbackTo = append(p.RollbackTo, rollbackOption{Version: n, Label: label})
	}

	ramps, err := svc.Ramps(ctx, key)
	switch {
	case feature.ErrorCode(err) == feature.ENotFound:
		return h.fail(c, http.StatusNotFound, "Feature not found", "Feature "+strconv.Quote(key)+" was deleted a moment ago.")
	case err != nil:
		return h.internal(c, err)
	}
	p.Ramps, p.Now = rampViews(ramps), time.Now()
	p.PM = newPMView(f, ramps, exposures.LastDay, exposures.LastDayUsers, p.Now)
	p.Data.LastDay, p.Data.ChurnLimit = cmp.Or(exposures.LastDayUsers, exposures.LastDay), churnLimit(ctx, svc)
	for _, r := range p.Ramps {
		p.LiveRamp = p.LiveRamp || r.Live
		if r.Live {
			p.LiveRamps = append(p.LiveRamps, r)
		} else {
			p.PastRamps = append(p.PastRamps, r)
		}
	}
	if p.Schedules, err = svc.Schedules(ctx, schedule.Query{Feature: key, Status: schedule.Pending}); err != nil {
		return h.internal(c, err)
	}

	if changed := c.QueryParam("changed"); changed != "" {
		if err := h.banner(c, &p, key, changed, versions); err != nil {
			return h.internal(c, err)
		}
	}

	status := http.StatusOK
	if c.QueryParams().Has("user") {
		if err := h.lookup(c, &p, key, c.QueryParam("user")); err != nil {
			var e *feature.Error
			if !errors.As(err, &e) || e.Code == feature.EInternal || e.Code == feature.EUnavailable {
				return h.internal(c, err)
			}
			p.Lookup.Error = e.Message
			status = http.StatusUnprocessableEntity
		}
	}
	return h.render(c, status, "feature", &p)
}

// sample counts the users of n synthetic ones ("user:0", "user:1", …) that
// the feature key serves each bucket, "" for none, evaluated as apps are.
func sample(snap *feature.Snapshot, key string, n int) map[string]int {
	counts := map[string]int{}
	for i := range n {
		e, err := snap.Peek(key, "user:"+strconv.Itoa(i))
		if err != nil {
			break // the snapshot has no such feature
		}
		counts[e.Bucket]++
	}
	return counts
}

// overrideRows lists f's overrides by user, at most overridesShown, and
// says how many more there are.
func overrideRows(f feature.Feature) ([]overrideRow, int) {
	users := slices.Sorted(maps.Keys(f.Overrides))
	more := 0
	if len(users) > overridesShown {
		users, more = users[:overridesShown], len(users)-overridesShown
	}
	rows := make([]overrideRow, len(users))
	for i, u := range users {
		rows[i] = overrideRow{User: u, Bucket: f.Overrides[u]}
	}
	return rows, more
}

// banner puts the churn of the version just applied at the top of the page.
func (h *handler) banner(c echo.Context, p *featurePage, key, changed string, versions []rollout.Version) error {
	n, err := strconv.Atoi(changed)
	if err != nil || n < 1 {
		p.BannerError = "The link names version " + strconv.Quote(changed) + ", which is not a version number."
		return nil
	}
	i := slices.IndexFunc(versions, func(v rollout.Version) bool { return v.Version == n })
	var v rollout.Version
	if i >= 0 {
		v = versions[i]
	} else {
		v, err = h.in(c).Version(c.Request().Context(), key, n)
		if feature.ErrorCode(err) == feature.ENotFound {
			p.BannerError = "Feature " + key + " has no version " + strconv.Itoa(n) + "."
			return nil
		}
		if err != nil {
			return err
		}
	}
	b := viewVersion(v)
	if i >= 0 {
		b.ModuloShown = p.Versions[i].ModuloShown
	}
	p.Banner = &b
	return nil
}

// lookup fills in the user's bucket now and at every version.
func (h *handler) lookup(c echo.Context, p *featurePage, key, user string) error {
	p.Lookup = lookupView{Asked: true, User: user}
	if err := feature.ValidateUser(user); err != nil {
		return err
	}
	now, err := h.in(c).Snapshot().Peek(key, user)
	if err != nil {
		return err
	}
	history, next, err := h.in(c).UserHistory(c.Request().Context(), key, user, 0, historyShown)
	if err != nil {
		return err
	}
	if next > 0 {
		p.Lookup.OlderVersions = next - 1
		p.Lookup.OlderURL = withEnv("/api/features/"+url.PathEscape(key)+"/users/"+url.PathEscape(user)+"?before="+strconv.Itoa(next), h.in(c).Environment())
	}
	p.Lookup.Now, p.Lookup.Reason = bucketLabel(now.Bucket), now.Reason
	for i, a := range history {
		row := lookupRow{Version: a.Version, Time: a.Time, Summary: sentence(a.Summary), Bucket: bucketLabel(deref(a.Bucket)), Reason: a.Reason}
		if i+1 < len(history) {
			if prev := bucketLabel(deref(history[i+1].Bucket)); prev != row.Bucket {
				row.Previous = prev
			}
		}
		p.Lookup.Rows = append(p.Lookup.Rows, row)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// changesShown is how many events the audit log lists on one page.
const changesShown = 50

// changesPage is the data of changes.html: the audit log.
type changesPage struct {
	frame
	Title          string
	Feature, Actor string // the filters; "" for any; Actor matches a part of the actor
	Kind           string // the kind filter; "" for every kind
	Keys           []string
	Kinds          []string // the kinds one can filter by
	Entries        []changeEntry
	OlderURL       string // the page of older events; "" when there is none
	Error          string
}

// changeEntry is one event of the audit log.
type changeEntry struct {
	audit.Event
	Label string // the kind in words
}

// kindLabels say the kinds of audit events in words.
var kindLabels = map[audit.Kind]string{
	audit.Create: "created", audit.Change: "changed", audit.Rollback: "rolled back", audit.Override: "override",
	audit.Archive: "archived", audit.Restore: "restored", audit.Purge: "purged",
	audit.RampCreate: "ramp started", audit.RampStep: "ramp step", audit.RampPause: "ramp paused",
	audit.RampResume: "ramp resumed", audit.RampCancel: "ramp canceled",
	audit.TokenCreate: "token created", audit.TokenRevoke: "token revoked", audit.Settings: "settings",
	audit.RequestCreate: "request submitted", audit.RequestApprove: "request approved",
	audit.RequestReject: "request rejected", audit.RequestCancel: "request withdrawn",
	audit.SegmentCreate: "segment created", audit.SegmentChange: "segment changed", audit.SegmentDelete: "segment deleted",
	audit.WebhookCreate: "webhook registered", audit.WebhookDelete: "webhook removed",
	audit.WebhookResume: "webhook resumed", audit.WebhookPaused: "webhook paused",
	audit.SessionCreate: "signed in", audit.SessionRevoke: "session ended",
	audit.MetricCreate: "metric created", audit.MetricDelete: "metric deleted",
	audit.ScheduleCreate: "change scheduled", audit.ScheduleApply: "scheduled change applied",
	audit.ScheduleFail: "scheduled change failed", audit.ScheduleCancel: "scheduled change canceled",
	audit.ExperimentStart: "experiment started", audit.ExperimentStop: "experiment stopped",
}

// kindLabel says kind k in words.
func kindLabel(k audit.Kind) string {
	if l, ok := kindLabels[k]; ok {
		return l
	}
	return strings.ReplaceAll(string(k), "_", " ")
}

// changes is the audit log: every audited event, newest first, filtered
// by feature, by a part of the actor's name and by kind, a page at a time.
func (h *handler) changes(c echo.Context) error {
	p := changesPage{Title: "Audit log", Feature: strings.TrimSpace(c.QueryParam("feature")), Actor: strings.TrimSpace(c.QueryParam("actor")),
		Kind: c.QueryParam("kind")}
	p.Keys = h.in(c).Snapshot().Keys()
	for _, k := range audit.Kinds {
		p.Kinds = append(p.Kinds, string(k))
	}
	if p.Kind != "" && !audit.Kind(p.Kind).Valid() {
		p.Error = "There is no kind of event " + strconv.Quote(abbreviateValue(p.Kind)) + ". Showing every kind."
		p.Kind = ""
	}
	if len(p.Actor) > 1000 || len(p.Feature) > 1000 {
		p.Error = "The filter is too long. Showing every event."
		p.Actor, p.Feature = "", ""
	}
	var before int64
	if q := c.QueryParam("before"); q != "" {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil || n < 1 {
			p.Error = "The link asks for changes before " + strconv.Quote(q) + ", which is not a position in the log. Showing the newest changes."
		} else {
			before = n
		}
	}
	es, err := h.in(c).AuditEvents(c.Request().Context(), audit.Query{Feature: p.Feature, ActorContains: p.Actor, Kind: audit.Kind(p.Kind),
		Before: before, Limit: changesShown + 1})
	if err != nil {
		return h.internal(c, err)
	}
	if len(es) > changesShown {
		es = es[:changesShown]
		q := url.Values{"before": {strconv.FormatInt(es[changesShown-1].ID, 10)}}
		for name, v := range map[string]string{"feature": p.Feature, "actor": p.Actor, "kind": p.Kind} {
			if v != "" {
				q.Set(name, v)
			}
		}
		p.OlderURL = withEnv("/ui/changes?"+q.Encode(), h.in(c).Environment())
	}
	for _, e := range es {
		p.Entries = append(p.Entries, changeEntry{Event: e, Label: kindLabel(e.Kind)})
	}
	return h.render(c, http.StatusOK, "changes", &p)
}
