package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/environment"
	"github.com/rollout/rollout/rollout/feature"
)

// Environments on the dashboard (issue #31): every page shows the
// environment of its request (?env=, else the token's, else production)
// and keeps it in its links and its script's requests; the header's
// switcher shows the page in another; a feature's page lists its
// configuration in each environment and promotes it from one to another,
// previewed by the exact churn in the target; the compare page lists the
// features two environments configure differently; admins manage the
// environments on their page. Promotions and the admin page's changes go
// through the JSON API from environments.js and admin.js.

// envView is an environment as a page shows it.
type envView struct {
	Key, Name string
	Protected bool
	URL       string // the page being shown, in this environment
}

// Query is the query that keeps the environment in a link: "" for
// production, which a request without one gets.
func (e envView) Query() string { return envQuery(e.Key) }

func envQuery(env string) string {
	if env == "" || env == rollout.Production {
		return ""
	}
	return "env=" + url.QueryEscape(env)
}

// withEnv returns the dashboard's or the API's path p (which may have a
// query and a fragment) in the environment env.
func withEnv(p, env string) string {
	q := envQuery(env)
	if q == "" {
		return p
	}
	p, frag, hasFrag := strings.Cut(p, "#")
	sep := "?"
	if strings.Contains(p, "?") {
		sep = "&"
	}
	p += sep + q
	if hasFrag {
		p += "#" + frag
	}
	return p
}

// Link returns the dashboard's path p in the page's environment: the
// templates write every link with it.
func (f frame) Link(p string) string { return withEnv(p, f.Env.Key) }

// in returns the service of the request's environment, which the API's
// middleware resolved before the handler (api.ServiceOf).
func (h *handler) in(c echo.Context) *rollout.Service { return api.ServiceOf(c, h.svc) }

// scope returns the environment the request's token is scoped to; "":
// every one.
func (h *handler) scope(c echo.Context) string {
	if h.sessions == nil || !h.sessions.Enforced() {
		return ""
	}
	tok, ok := h.sessions.Who(c)
	if !ok {
		return ""
	}
	return tok.Environment
}

// visible returns the environments the request's token may see, by
// position: every one, or the one it is scoped to.
func (h *handler) visible(c echo.Context) []rollout.Environment {
	scope := h.scope(c)
	var out []rollout.Environment
	for _, e := range h.envs.List() {
		if scope == "" || e.Key == scope {
			out = append(out, e)
		}
	}
	return out
}

// fillEnv says on the page's frame which environment it shows, and the
// switcher's links to the same page in the others the viewer may see.
func (h *handler) fillEnv(c echo.Context, f *frame) {
	cur := h.in(c).Environment()
	env, ok := h.envs.Get(cur)
	if !ok {
		env = rollout.Environment{Key: cur, Name: cur}
	}
	u := c.Request().URL
	f.Env = envView{Key: env.Key, Name: env.Name, Protected: env.Protected, URL: switchURL(u, env.Key)}
	f.Envs = f.Envs[:0]
	for _, e := range h.visible(c) {
		f.Envs = append(f.Envs, envView{Key: e.Key, Name: e.Name, Protected: e.Protected, URL: switchURL(u, e.Key)})
	}
}

// switchURL is the page u in the environment env: its query kept but for
// the banner of a change just made.
func switchURL(u *url.URL, env string) string {
	q := u.Query()
	q.Del("changed")
	q.Del("saved")
	q.Del("env")
	if env != rollout.Production {
		q.Set("env", env)
	}
	p := u.Path
	if s := q.Encode(); s != "" {
		p += "?" + s
	}
	return p
}

// featureURL is the page of the feature key in the environment env.
func featureURL(key, env string) string {
	return withEnv("/ui/features/"+url.PathEscape(key), env)
}

// placeView is a feature's configuration in one environment, as the
// environments table and the compare page show it.
type placeView struct {
	envView
	Current   bool // the page's environment
	Enabled   bool
	Fallback  string
	Bar       shareBar // what users get: the shares, or the fallback when off
	Rules     int
	Overrides int
	BucketBy  string
	Version   int
	Tag       string // the ETag, for If-Match
	Updated   time.Time
	Last      *versionView // its last change; nil when unknown
	Page      string       // the feature's page there
}

// newPlaceView describes p, the configuration of a feature in the
// environment env, its bars coloured by colour.
func newPlaceView(env rollout.Environment, key string, p environment.Placement, colour map[string]int) placeView {
	names := make([]string, len(p.Buckets))
	for i, b := range p.Buckets {
		names[i] = b.Name
	}
	v := placeView{
		envView: envView{Key: env.Key, Name: env.Name, Protected: env.Protected},
		Enabled: p.Enabled, Fallback: p.Fallback, Rules: len(p.Rules), Overrides: p.OverridesCount,
		BucketBy: p.BucketBy, Version: p.Version, Tag: p.ETag, Page: featureURL(key, env.Key),
		Bar: newBar(names, p.Shares, colour),
	}
	if !p.Enabled {
		v.Bar = shareBar{}
		if p.Fallback != "" {
			v.Bar = newBar([]string{p.Fallback}, map[string]float64{p.Fallback: 1}, colour)
		}
	}
	v.Updated, _ = time.Parse(time.RFC3339Nano, p.UpdatedAt)
	return v
}

// promoteView is a feature page's environments table and promote form.
type promoteView struct {
	Rows  []placeView // by the environments' positions
	Parts []partOption
	Data  promoteData
	// From and To are the form's defaults (promoteDefaults).
	From, To string
}

// partOption is one part of a promotion the form offers.
type partOption struct {
	Name, Label string
	Default     bool
}

var partLabels = map[string]string{
	environment.PartBuckets:   "buckets and shares",
	environment.PartRules:     "targeting rules",
	environment.PartEnabled:   "on/off",
	environment.PartFallback:  "fallback",
	environment.PartBucketBy:  "bucket_by",
	environment.PartOverrides: "overrides (pinned users)",
}

func partOptions() []partOption {
	out := make([]partOption, len(environment.Parts))
	for i, p := range environment.Parts {
		out[i] = partOption{Name: p, Label: partLabels[p], Default: slices.Contains(environment.DefaultParts, p)}
	}
	return out
}

// promoteData is what environments.js needs to promote a feature.
type promoteData struct {
	Key          string       `json:"key"`
	Current      string       `json:"current"`
	Environments []promoteEnv `json:"environments"`
}

type promoteEnv struct {
	Key       string `json:"key"`
	Name      string `json:"name"`
	Protected bool   `json:"protected"`
	Version   int    `json:"version"`
	Tag       string `json:"tag"`
}

// promotion fills the feature page's environments: the configuration of
// feature f in each environment the viewer sees, and the promote form's
// data. cur is the page's service, versions f's newest versions there.
func (h *handler) promotion(ctx context.Context, envs []rollout.Environment, svcCur *rollout.Service, f feature.Feature, versions []rollout.Version) (promoteView, error) {
	cur := svcCur.Environment()
	v := promoteView{Parts: partOptions(), Data: promoteData{Key: f.Key, Current: cur, Environments: []promoteEnv{}}}
	colour := colors(f)
	ps, err := h.envs.Placements(f.Key)
	if err != nil {
		return v, err
	}
	for _, env := range envs {
		svc, ok := h.envs.Service(env.Key)
		i := slices.IndexFunc(ps, func(p environment.Placement) bool { return p.Environment == env.Key })
		if !ok || i < 0 {
			continue
		}
		row := newPlaceView(env, f.Key, ps[i], colour)
		row.Current = env.Key == cur
		last, err := versions, error(nil)
		if svc != svcCur {
			last, err = svc.Versions(ctx, f.Key, 0, 1)
		}
		switch {
		case feature.ErrorCode(err) == feature.ENotFound:
			continue
		case err != nil:
			return v, err
		case len(last) > 0:
			lv := viewVersion(last[0])
			row.Last = &lv
		}
		v.Rows = append(v.Rows, row)
		v.Data.Environments = append(v.Data.Environments, promoteEnv{Key: env.Key, Name: env.Name, Protected: env.Protected, Version: row.Version, Tag: row.Tag})
	}
	v.From, v.To = promoteDefaults(v.Rows, cur)
	return v, nil
}

// promoteDefaults picks the promote form's source and target among rows
// on the page of the environment cur: from this environment to the first
// protected one (else the first other), or, on a protected environment's
// page, from the first unprotected one (else the first other) to it.
func promoteDefaults(rows []placeView, cur string) (from, to string) {
	i := slices.IndexFunc(rows, func(r placeView) bool { return r.Key == cur })
	if i < 0 || len(rows) < 2 {
		return "", ""
	}
	pick := func(protected bool) string {
		for _, r := range rows {
			if r.Key != cur && r.Protected == protected {
				return r.Key
			}
		}
		for _, r := range rows {
			if r.Key != cur {
				return r.Key
			}
		}
		return ""
	}
	if rows[i].Protected {
		return pick(false), cur
	}
	return cur, pick(true)
}

// comparePage is the data of compare.html.
type comparePage struct {
	frame
	Title    string
	From, To envView
	Choices  []envView // the environments one may compare
	Rows     []compareRow
	Error    string
	Data     compareData
}

// compareRow is one feature whose configuration differs.
type compareRow struct {
	Key        string
	Differs    []string
	From, To   *placeView // nil where the environment lacks the feature
	Promotable bool       // both have it: a promotion can make them equal
}

// compareData is what environments.js needs on the compare page.
type compareData struct {
	From        string `json:"from"`
	FromName    string `json:"from_name"`
	To          string `json:"to"`
	ToName      string `json:"to_name"`
	ToProtected bool   `json:"to_protected"`
}

// compare is the compare page: every feature whose configuration differs
// between two environments, side by side, each with a promotion's preview
// a click away. Comparing needs a token of every environment, as the API's
// route does.
func (h *handler) compare(c echo.Context) error {
	p := comparePage{Title: "Compare environments"}
	if scope := h.scope(c); scope != "" {
		return h.fail(c, http.StatusForbidden, "Comparing needs every environment",
			"Your token sees environment "+scope+" alone: comparing environments needs a token of every environment.")
	}
	envs := h.envs.List()
	if len(envs) < 2 {
		p.Error = "This server has one environment: there is nothing to compare it with. An admin can create another on the environments page."
		return h.render(c, http.StatusOK, "compare", &p)
	}
	from, to := c.QueryParam("from"), c.QueryParam("to")
	if to == "" {
		to = envs[0].Key
		if _, ok := h.envs.Get(rollout.Production); ok {
			to = rollout.Production
		}
		if to == from {
			to = envs[1].Key
		}
	}
	if from == "" {
		for _, e := range envs {
			if e.Key != to {
				from = e.Key
				break
			}
		}
	}
	fromEnv, okFrom := h.envs.Get(from)
	toEnv, okTo := h.envs.Get(to)
	for _, e := range envs {
		p.Choices = append(p.Choices, envView{Key: e.Key, Name: e.Name, Protected: e.Protected})
	}
	if !okFrom || !okTo {
		missing := from
		if okFrom {
			missing = to
		}
		return h.fail(c, http.StatusNotFound, "Environment not found",
			"There is no environment "+strconv.Quote(clipText(missing))+". It may have been deleted, or the link may be mistyped.")
	}
	p.From = envView{Key: fromEnv.Key, Name: fromEnv.Name, Protected: fromEnv.Protected}
	p.To = envView{Key: toEnv.Key, Name: toEnv.Name, Protected: toEnv.Protected}
	p.Data = compareData{From: from, FromName: fromEnv.Name, To: to, ToName: toEnv.Name, ToProtected: toEnv.Protected}
	if from == to {
		p.Error = "Pick two different environments to compare."
		return h.render(c, http.StatusOK, "compare", &p)
	}
	diffs, err := h.envs.Compare(from, to)
	if err != nil {
		return h.internal(c, err)
	}
	for _, d := range diffs {
		row := compareRow{Key: d.Feature, Differs: d.Differs, Promotable: d.From != nil && d.To != nil}
		colour := map[string]int{}
		for _, pl := range []*environment.Placement{d.From, d.To} {
			if pl == nil {
				continue
			}
			for _, b := range pl.Buckets {
				if _, ok := colour[b.Name]; !ok {
					colour[b.Name] = len(colour) % palette
				}
			}
		}
		if d.From != nil {
			v := newPlaceView(fromEnv, d.Feature, *d.From, colour)
			row.From = &v
		}
		if d.To != nil {
			v := newPlaceView(toEnv, d.Feature, *d.To, colour)
			row.To = &v
		}
		p.Rows = append(p.Rows, row)
	}
	return h.render(c, http.StatusOK, "compare", &p)
}

func clipText(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// environmentsPage is the data of environments.html, the admins' page.
type environmentsPage struct {
	frame
	Title string
	List  []envAdminRow
}

// envAdminRow is one environment on the admins' page.
type envAdminRow struct {
	rollout.Environment
	Features int // the features it serves
}

// environments is the admins' page of environments: the list (of those
// the token sees), and the forms that create (empty or copied), rename,
// protect and delete them, which admin.js sends to the API.
func (h *handler) environments(c echo.Context) error {
	p := environmentsPage{Title: "Environments"}
	for _, e := range h.visible(c) {
		row := envAdminRow{Environment: e}
		if svc, ok := h.envs.Service(e.Key); ok {
			row.Features = len(svc.Snapshot().Keys())
		}
		p.List = append(p.List, row)
	}
	return h.render(c, http.StatusOK, "environments", &p)
}
