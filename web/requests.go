package web

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/request"
	"github.com/rollout/rollout/rollout/settings"
)

// The change requests page and the admin's settings page. Both read
// through the service; approving, rejecting, canceling and saving go to
// the API from requests.js.

// requestsShown is how many decided requests the page lists at most (and
// the feature page's notice counts of open ones); every open one is listed,
// up to request.MaxPage.
const requestsShown = 100

// requestsPage is the data of requests.html.
type requestsPage struct {
	frame
	Title    string
	Open     []requestView
	Decided  []requestView
	Settings settings.Settings
	// Inbox: the page lists only the open requests the signed-in person
	// may decide (the header's inbox).
	Inbox bool
}

// requestView is a request with what the page shows of it.
type requestView struct {
	request.Request
	Mine       bool // the signed-in person wrote it: they cancel, others decide
	CanDecide  bool
	Bar        shareBar // the shares after the change, as previewed
	BarBefore  shareBar
	ChangeText string
	Decided    time.Time // when it was decided; zero while open
	// Env is the environment the request is in, where the page lists
	// several (the inbox); its key "" on a page of one environment.
	Env envView
}

func (h *handler) requests(c echo.Context) error {
	return h.requestsPage(c, false)
}

// inbox is /ui/inbox: the open requests the signed-in person may decide,
// each with its preview.
func (h *handler) inbox(c echo.Context) error {
	return h.requestsPage(c, true)
}

func (h *handler) requestsPage(c echo.Context, inbox bool) error {
	ctx := c.Request().Context()
	svc := h.in(c)
	p := requestsPage{Title: "Change requests", Inbox: inbox}
	if inbox {
		p.Title = "Inbox: requests you can approve"
	}
	h.fillFrame(c, &p.frame)
	st, err := svc.Settings(ctx)
	if err != nil {
		return h.internal(c, err)
	}
	p.Settings = st
	if inbox {
		// Every environment the person may see: an approver is told of
		// production's requests while looking at staging.
		for _, e := range h.visible(c) {
			es, ok := h.envs.Service(e.Key)
			if !ok {
				continue
			}
			open, err := es.Requests(ctx, request.Query{State: request.Open})
			if err != nil {
				return h.internal(c, err)
			}
			for _, r := range open {
				if v := h.viewRequest(p.frame, r); v.CanDecide {
					v.Env = envView{Key: e.Key, Name: e.Name, Protected: e.Protected}
					p.Open = append(p.Open, v)
				}
			}
		}
		return h.render(c, http.StatusOK, "requests", &p)
	}
	open, err := svc.Requests(ctx, request.Query{State: request.Open})
	if err != nil {
		return h.internal(c, err)
	}
	for _, r := range open {
		p.Open = append(p.Open, h.viewRequest(p.frame, r))
	}
	recent, err := svc.Requests(ctx, request.Query{Limit: len(open) + requestsShown})
	if err != nil {
		return h.internal(c, err)
	}
	for _, r := range recent {
		if r.State != request.Open && len(p.Decided) < requestsShown {
			p.Decided = append(p.Decided, h.viewRequest(p.frame, r))
		}
	}
	return h.render(c, http.StatusOK, "requests", &p)
}

func (h *handler) viewRequest(f frame, r request.Request) requestView {
	v := requestView{Request: r}
	v.Mine = f.Who != "" && f.Who == r.Author
	v.CanDecide = !f.ReadOnly && !v.Mine
	names := map[string]bool{}
	for n := range r.Report.SharesBefore {
		names[n] = true
	}
	for n := range r.Report.SharesAfter {
		names[n] = true
	}
	order := slices.Sorted(func(yield func(string) bool) {
		for n := range names {
			if !yield(n) {
				return
			}
		}
	})
	colour := map[string]int{}
	for i, n := range order {
		colour[n] = i % palette
	}
	v.BarBefore = newBar(order, r.Report.SharesBefore, colour)
	v.Bar = newBar(order, r.Report.SharesAfter, colour)
	v.ChangeText = r.Change.Words()
	if r.DecidedAt != nil {
		v.Decided = *r.DecidedAt
	}
	return v
}

// settingsPage is the data of settings.html.
type settingsPage struct {
	frame
	Title    string
	Settings settings.Settings
	Features string // the policy's features, one a line
	Percent  string // the churn limit in percent
	Updated  time.Time
	Admin    bool
}

func (h *handler) settings(c echo.Context) error {
	st, err := h.in(c).Settings(c.Request().Context())
	if err != nil {
		return h.internal(c, err)
	}
	p := settingsPage{Title: "Settings", Settings: st, Features: strings.Join(st.RequireApproval.Features, "\n"),
		Percent: strconv.FormatFloat(100*st.MaxChurn, 'f', -1, 64)}
	if st.UpdatedAt != nil {
		p.Updated = *st.UpdatedAt
	}
	h.fillFrame(c, &p.frame)
	p.Admin = p.Role == auth.RoleAdmin || p.Who == "" // an open API: anyone on this host
	return h.render(c, http.StatusOK, "settings", &p)
}

// inboxCount is how many open requests the person of f may decide, in
// every environment they may see: those of others, when they may change
// features.
func (h *handler) inboxCount(c echo.Context, f *frame) int {
	if f.ReadOnly {
		return 0
	}
	n := 0
	for _, e := range h.visible(c) {
		es, ok := h.envs.Service(e.Key)
		if !ok {
			continue
		}
		open, err := es.Requests(c.Request().Context(), request.Query{State: request.Open})
		if err != nil {
			h.logError(c, "count the inbox", err)
			return 0
		}
		for _, r := range open {
			if f.Who == "" || r.Author != f.Who {
				n++
			}
		}
	}
	return n
}
