package web

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/ramp"
)

// When a feature is stale (see status): fully rolled out and unchanged for
// staleUnchanged, or not evaluated by apps for staleUnevaluated.
const (
	staleUnchanged   = 30 * 24 * time.Hour
	staleUnevaluated = 7 * 24 * time.Hour
)

// Statuses of a feature on the list, its chip's class and data-status.
const (
	statusOff      = "off"
	statusDormant  = "dormant"
	statusRamping  = "ramping"
	statusFull     = "full" // 100 %
	statusSplit    = "split"
	statusArchived = "archived"
)

// evaluatedFor is how long the list trusts a feature's last evaluation
// hour: reading it reads every stored count of the feature, and staleness
// is counted in days.
const evaluatedFor = 10 * time.Minute

// lastEvaluations keeps the features' last evaluation hours for the list,
// by environment and feature key, for evaluatedFor of the server's clock.
// Safe for concurrent use.
type lastEvaluations struct {
	mu    sync.Mutex
	byKey map[envFeature]lastEvaluation
}

type envFeature struct{ env, key string }

type lastEvaluation struct {
	id       string // the feature's ID: a feature deleted and created again is read anew
	last, at time.Time
}

// get returns the last evaluation of f, read again once evaluatedFor old.
func (l *lastEvaluations) get(ctx context.Context, svc *rollout.Service, f feature.Feature, now time.Time) (time.Time, error) {
	k := envFeature{svc.Environment(), f.Key}
	l.mu.Lock()
	e, ok := l.byKey[k]
	l.mu.Unlock()
	if ok && e.id == f.ID && now.Sub(e.at) < evaluatedFor && !now.Before(e.at) {
		return e.last, nil
	}
	last, err := svc.LastEvaluated(ctx, f.Key)
	if err != nil {
		return time.Time{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKey == nil {
		l.byKey = map[envFeature]lastEvaluation{}
	}
	l.byKey[k] = lastEvaluation{id: f.ID, last: last, at: now}
	return last, nil
}

// keep forgets the features of the environment env that are not among
// keys, and those of environments for which exists is false (deleted).
func (l *lastEvaluations) keep(env string, keys []string, exists func(env string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.byKey {
		if _, found := slices.BinarySearch(keys, k.key); (k.env == env && !found) || !exists(k.env) {
			delete(l.byKey, k)
		}
	}
}

// listPage is the data of list.html.
type listPage struct {
	frame
	Title    string
	Query    string   // the filter's text
	Tag      []string // only features with every one of these tags (none: any)
	Owner    string   // only features of this owner ("": any)
	Status   string   // only features of this status, or "stale" ("": any)
	Sort     string   // "changed" (newest change first) or "name"
	Features []featureItem
	Shown    int         // features that match the filters
	Total    int         // of which the filters pick: the features served, or the archived ones
	Tags     []tagChoice // every tag, for the tag filter
	Owners   []string    // every owner, for the owner filter
	Now      time.Time
}

// tagChoice is a tag of the tag filter, and whether it is picked.
type tagChoice struct {
	Name   string
	Chosen bool
}

// TagsChosen are the tags the filter picks.
func (p *listPage) TagsChosen() []string { return p.Tag }

// featureItem is one feature on the list.
type featureItem struct {
	Key, Description string
	Enabled          bool
	Fallback         string
	Version          int
	Tag              string   // for If-Match
	Bar              shareBar // what users get now
	Last             *versionView
	Tags             []string
	Owner            string
	Status           string // one of the status constants
	StatusLabel      string // the chip's text
	StatusTitle      string // what the chip means, in a sentence
	Stale            string // why the feature is stale; "": it is not
	Archived         bool   // archived: served to no app, kept with its history
	Search           string // what the filter matches: key, description, tags and owner, lower case
	Hidden           bool   // does not match the filters
}

// list is the features list: a table of every feature with its status,
// shares and last change, filtered by text, tag, owner and status, and the
// create form.
func (h *handler) list(c echo.Context) error {
	ctx := c.Request().Context()
	svc := h.in(c)
	snap := svc.Snapshot()
	now := svc.Now()
	p := listPage{
		Title: "Features", Now: now,
		Query: strings.TrimSpace(c.QueryParam("q")), Tag: tagsOf(c.QueryParams()["tag"]), Owner: c.QueryParam("owner"),
		Status: c.QueryParam("status"), Sort: c.QueryParam("sort"),
	}
	if p.Sort != "name" {
		p.Sort = "changed"
	}
	ramps, err := svc.Ramps(ctx, "")
	if err != nil {
		return h.internal(c, err)
	}
	live := map[string]ramp.Ramp{} // the live ramp of each feature
	for _, r := range ramps {
		if r.Live() {
			live[r.Feature] = r
		}
	}
	tags, owners := map[string]bool{}, map[string]bool{}
	for _, key := range snap.Keys() {
		f, ok := snap.Feature(key)
		if !ok {
			continue
		}
		shares, _ := snap.Shares(key)
		item := featureItem{
			Key: f.Key, Description: f.Description, Enabled: f.Enabled, Fallback: f.Fallback, Version: f.Version, Tag: f.Tag(),
			Bar:    newBar(bucketNames(f), shares, colors(f)),
			Tags:   f.Tags,
			Owner:  f.Owner,
			Search: strings.ToLower(strings.Join(append([]string{f.Key, f.Description, f.Owner}, f.Tags...), " ")),
		}
		if !f.Enabled && f.Fallback != "" {
			item.Bar = newBar([]string{f.Fallback}, map[string]float64{f.Fallback: 1}, colors(f))
		}
		last, err := svc.Versions(ctx, key, 0, 1)
		switch {
		case feature.ErrorCode(err) == feature.ENotFound:
			continue // deleted since the snapshot was taken
		case err != nil:
			return h.internal(c, err)
		case len(last) > 0:
			v := viewVersion(last[0])
			item.Last = &v
		}
		evaluated, err := h.evaluated.get(ctx, svc, f, now)
		switch {
		case feature.ErrorCode(err) == feature.ENotFound:
			continue
		case err != nil:
			return h.internal(c, err)
		}
		var ramp *ramp.Ramp
		if r, ok := live[key]; ok {
			ramp = &r
		}
		item.status(f, shares, ramp, evaluated, now)
		for _, t := range f.Tags {
			tags[t] = true
		}
		if f.Owner != "" {
			owners[f.Owner] = true
		}
		p.Features = append(p.Features, item)
	}
	h.evaluated.keep(svc.Environment(), snap.Keys(), func(env string) bool {
		_, ok := h.envs.Get(env)
		return ok
	})
	// Archived features join the list, shown only by the "archived"
	// status filter: they are served to no app, but kept with their
	// history, and can be restored from their page.
	archived, err := svc.ArchivedFeatures(ctx)
	if err != nil {
		return h.internal(c, err)
	}
	for _, f := range archived {
		item := featureItem{
			Key: f.Key, Description: f.Description, Enabled: f.Enabled, Fallback: f.Fallback, Version: f.Version, Tag: f.Tag(),
			Bar:      newBar(bucketNames(f), f.Ring().Shares(), colors(f)),
			Tags:     f.Tags,
			Owner:    f.Owner,
			Archived: true,
			Search:   strings.ToLower(strings.Join(append([]string{f.Key, f.Description, f.Owner}, f.Tags...), " ")),
		}
		item.status(f, nil, nil, time.Time{}, now)
		p.Features = append(p.Features, item)
	}
	for i := range p.Features {
		it := &p.Features[i]
		it.Hidden = !p.matches(it)
		if !it.Hidden {
			p.Shown++
		}
		if (p.Status == statusArchived) == it.Archived {
			p.Total++
		}
	}
	p.sort()
	for _, t := range p.Tag {
		tags[t] = true // a tag picked in a link is offered, even when no feature has it
	}
	for _, t := range slices.SortedFunc(func(yield func(string) bool) {
		for t := range tags {
			if !yield(t) {
				return
			}
		}
	}, naturalCompare) {
		p.Tags = append(p.Tags, tagChoice{Name: t, Chosen: slices.Contains(p.Tag, t)})
	}
	p.Owners = slices.Sorted(func(yield func(string) bool) {
		for o := range owners {
			if !yield(o) {
				return
			}
		}
	})
	return h.render(c, http.StatusOK, "list", &p)
}

// matches reports whether it passes the page's filters, as the page's
// script decides them as the user types.
func (p *listPage) matches(it *featureItem) bool {
	switch {
	case !strings.Contains(it.Search, strings.ToLower(p.Query)):
		return false
	case !hasEvery(it.Tags, p.Tag):
		return false
	case p.Owner != "" && it.Owner != p.Owner:
		return false
	case (p.Status == statusArchived) != it.Archived:
		return false
	case p.Status == "stale":
		return it.Stale != ""
	case p.Status != "" && it.Status != p.Status:
		return false
	}
	return true
}

// sort orders the features by name, or by their last change, newest first.
func (p *listPage) sort() {
	slices.SortStableFunc(p.Features, func(a, b featureItem) int {
		if p.Sort == "changed" {
			if c := lastTime(b).Compare(lastTime(a)); c != 0 {
				return c
			}
		}
		return naturalCompare(a.Key, b.Key)
	})
}

// tagsOf are the tags of a query's tag parameters, each once, in their
// order; empty ones are dropped.
func tagsOf(values []string) []string {
	var tags []string
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" && !slices.Contains(tags, v) && len(tags) < maxTagFilters {
			tags = append(tags, v)
		}
	}
	return tags
}

// maxTagFilters bounds the tags a list's address may pick.
const maxTagFilters = 50

// hasEvery reports whether tags holds every one of want.
func hasEvery(tags, want []string) bool {
	for _, w := range want {
		if !slices.Contains(tags, w) {
			return false
		}
	}
	return true
}

// naturalCompare orders names as people count: the digits in them by
// their number, so that feat-9 comes before feat-49, and the rest byte by
// byte. Names equal as numbers ("a-01", "a-1") are ordered byte by byte.
// The list's script orders rows the same way.
func naturalCompare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na, nb := strings.TrimLeft(a[si:i], "0"), strings.TrimLeft(b[sj:j], "0")
			if c := cmp.Compare(len(na), len(nb)); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			continue
		}
		if c := cmp.Compare(ca, cb); c != 0 {
			return c
		}
		i++
		j++
	}
	if c := cmp.Compare(len(a)-i, len(b)-j); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func lastTime(it featureItem) time.Time {
	if it.Last == nil {
		return time.Time{}
	}
	return it.Last.Time
}

// ChangedUnix is the time of the last change, for the script's sort.
func (it featureItem) ChangedUnix() int64 { return lastTime(it).UnixMilli() }

// TagList is the tags with a space either side of each, as the script
// matches them.
func (it featureItem) TagList() string { return " " + strings.Join(it.Tags, " ") + " " }

// status decides the feature's chip and whether it is stale.
//
//   - Archived: archived (served to no app).
//   - Off: the kill switch is off.
//   - Ramping: a ramp is active or paused; the chip says its next step
//     and when.
//   - Dormant: on, but every user gets the feature's baseline bucket: the
//     fallback when it has one, else a bucket named off, control, false or
//     disabled (in any case). Every other bucket serves 0 %.
//   - 100 %: on, and one bucket that is not the baseline serves every user.
//   - Split: on, several buckets serve users.
//
// Stale, beside any of these but Archived: fully rolled out (Dormant or
// 100 %) and unchanged for 30 days, or not evaluated by apps for 7 days
// (from the hours of the stored exposure counts; a feature created less
// than 7 days ago is not stale for want of evaluations). now is the
// server's clock.
func (it *featureItem) status(f feature.Feature, shares map[string]float64, ramp *ramp.Ramp, evaluated, now time.Time) {
	baseline := baselineBucket(f)
	top, topShare := "", -1.0
	for _, b := range f.Buckets {
		if s := shares[b.Name]; s > topShare {
			top, topShare = b.Name, s
		}
	}
	whole := topShare >= 1-1e-12
	switch {
	case it.Archived:
		it.Status, it.StatusLabel, it.StatusTitle = statusArchived, "Archived", "Archived: apps get not-found; its history is kept."
		return
	case !f.Enabled:
		it.Status, it.StatusLabel = statusOff, "Off"
		if f.Fallback != "" {
			it.StatusTitle = "The kill switch is off: every user gets " + f.Fallback + "."
		} else {
			it.StatusTitle = "The kill switch is off: no bucket is served; apps use their default."
		}
	case ramp != nil:
		it.Status = statusRamping
		it.StatusLabel, it.StatusTitle = rampChip(*ramp, now)
	case whole && top == baseline:
		it.Status, it.StatusLabel, it.StatusTitle = statusDormant, "Dormant", "Every user gets "+baseline+": the other buckets serve 0 %."
	case whole:
		it.Status, it.StatusLabel, it.StatusTitle = statusFull, "100 %", "Every user gets "+top+"."
	default:
		it.Status, it.StatusLabel = statusSplit, "Split"
		it.StatusTitle = "Users are split between buckets."
	}
	unchanged := it.Last != nil && now.Sub(it.Last.Time) >= staleUnchanged
	created := f.CreatedAt
	switch {
	case f.Enabled && ramp == nil && whole && unchanged:
		it.Stale = "Fully rolled out and unchanged for " + days(now.Sub(it.Last.Time)) + ": clean it up?"
	case evaluated.IsZero() && now.Sub(created) >= staleUnevaluated:
		it.Stale = "Never evaluated by apps in the " + days(now.Sub(created)) + " since it was created."
	case !evaluated.IsZero() && now.Sub(evaluated) >= staleUnevaluated:
		it.Stale = "Not evaluated by apps for " + days(now.Sub(evaluated)) + "."
	}
}

// baselineBucket is the bucket a dormant feature serves everyone: its
// fallback, or a bucket named as "nothing new" (off, control, false,
// disabled, in any case); "" when it has none.
func baselineBucket(f feature.Feature) string {
	if f.Fallback != "" {
		return f.Fallback
	}
	for _, b := range f.Buckets {
		switch strings.ToLower(b.Name) {
		case "off", "control", "false", "disabled":
			return b.Name
		}
	}
	return ""
}

// rampChip is a ramping feature's chip: its next step and when.
func rampChip(r ramp.Ramp, now time.Time) (label, title string) {
	if r.State == ramp.Paused {
		return "Ramp paused", "Its ramp of " + r.Bucket + " is paused" + strings.TrimSuffix(": "+rampReason(r.Reason), ": ") + "."
	}
	if r.Next >= len(r.Steps) {
		return "Ramping", "Ramping " + r.Bucket + "."
	}
	st := r.Steps[r.Next]
	share := strconv.FormatFloat(math.Round(st.Share*10000)/100, 'f', -1, 64) + " %"
	return "Ramping → " + share + " " + until(st.At, now),
		"Ramping " + r.Bucket + ": the next step takes it to " + share + " of users at " + st.At.UTC().Format("2006-01-02 15:04 UTC") + "."
}

// days says a duration in whole days.
func days(d time.Duration) string {
	n := int(d / (24 * time.Hour))
	if n == 1 {
		return "1 day"
	}
	return strconv.Itoa(n) + " days"
}

// statusName is a status filter's option.
func statusName(s string) string {
	switch s {
	case statusOff:
		return "Off"
	case statusDormant:
		return "Dormant (0 %)"
	case statusRamping:
		return "Ramping"
	case statusFull:
		return "100 %"
	case statusSplit:
		return "Split"
	case statusArchived:
		return "Archived"
	case "stale":
		return "Stale"
	}
	return s
}

// ago says how long before now t was, roughly: "just now", "5 min ago",
// "3 h ago", "40 days ago".
func ago(t, now time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min ago"
	case d < 24*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + " h ago"
	}
	return days(d) + " ago"
}
