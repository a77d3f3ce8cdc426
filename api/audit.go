package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rollout/rollout/rollout/audit"
)

// maxAuditExport is how many events one JSON lines answer of GET
// /api/audit holds at most (its limit's default and bound): about 5 MB of
// events. A client reads on with after=<the last event's id>.
const maxAuditExport = 10000

// auditPage answers GET /api/audit as JSON.
type auditPage struct {
	Events []audit.Event `json:"events"`
	Next   *string       `json:"next"` // the URL of the next page; null on the last
}

// listAudit is GET /api/audit?feature=K&actor=A&kind=X&since=RFC3339: the
// audit trail, filtered, a page at a time (?limit=N, 1 to
// audit.MaxPage, audit.DefaultPage when absent). Pages are
// newest first and follow ?before=ID; ?order=asc (or ?after=ID) gives them
// oldest first, following ?after=ID. With Accept: application/x-ndjson
// the events come as JSON lines, oldest first, at most limit of them
// (maxAuditExport when absent): an export, continued with after=<the last
// line's id> until an answer holds fewer lines than its limit.
func (s *Server) listAudit(c echo.Context) error {
	ndjson := strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "application/x-ndjson")
	q, err := auditQuery(c, ndjson)
	if err != nil {
		return err
	}
	if ndjson {
		return s.exportAudit(c, q)
	}
	want := q.Limit
	q.Limit++ // one more tells whether another page follows
	events, err := s.in(c).AuditEvents(c.Request().Context(), q)
	if err != nil {
		return err
	}
	page := auditPage{Events: events}
	if len(events) > want {
		page.Events = events[:want]
		last := page.Events[want-1].ID
		next := url.Values{}
		for _, name := range []string{"feature", "actor", "actor_contains", "kind", "since"} {
			if v := c.QueryParam(name); v != "" {
				next.Set(name, v)
			}
		}
		next.Set("limit", strconv.Itoa(want))
		if q.Ascending {
			next.Set("order", "asc")
			next.Set("after", strconv.FormatInt(last, 10))
		} else {
			next.Set("before", strconv.FormatInt(last, 10))
		}
		link := c.Request().URL.EscapedPath() + "?" + next.Encode()
		c.Response().Header().Set("Link", "<"+link+`>; rel="next"`)
		page.Next = &link
	}
	return c.JSON(http.StatusOK, page)
}

// exportAudit writes the events q selects as JSON lines, oldest first,
// audit.MaxPage at a time.
func (s *Server) exportAudit(c echo.Context, q audit.Query) error {
	total := q.Limit
	q.Ascending, q.Before = true, 0
	w := c.Response()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	started := false
	for sent := 0; sent < total; {
		q.Limit = min(audit.MaxPage, total-sent)
		events, err := s.in(c).AuditEvents(c.Request().Context(), q)
		if err != nil {
			if !started {
				return err
			}
			return nil // the answer has begun: it ends short, and the client reads on from its last line
		}
		if !started {
			w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		for _, e := range events {
			if err := enc.Encode(e); err != nil {
				return nil // the client is gone
			}
		}
		w.Flush()
		sent += len(events)
		if len(events) < q.Limit {
			break
		}
		q.After = events[len(events)-1].ID
	}
	if !started {
		w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
	}
	return nil
}

// auditQuery reads GET /api/audit's query.
func auditQuery(c echo.Context, ndjson bool) (audit.Query, error) {
	q := audit.Query{
		Feature: c.QueryParam("feature"),
		Actor:   c.QueryParam("actor"),
		// actor_contains: any actor that contains it, ignoring case.
		ActorContains: c.QueryParam("actor_contains"),
		Kind:          audit.Kind(c.QueryParam("kind")),
		Limit:         audit.DefaultPage,
	}
	maxLimit := audit.MaxPage
	if ndjson {
		q.Limit, maxLimit = maxAuditExport, maxAuditExport
	}
	for name, v := range map[string]string{"feature": q.Feature, "actor": q.Actor, "actor_contains": q.ActorContains} {
		if len(v) > 1000 {
			return q, badRequest("%s is %d bytes long: no %s is longer than 1000", name, len(v), name)
		}
	}
	if q.Kind != "" && !q.Kind.Valid() {
		return q, badRequest("kind=%q is not a kind of audit event: give one of %s", q.Kind, audit.KindNames())
	}
	if v := c.QueryParam("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return q, badRequest("since=%q is not an RFC 3339 time: give one such as 2026-01-02T15:04:05Z", v)
		}
		q.Since = t
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return q, badRequest("limit=%q: give a number of events from 1 to %d", v, maxLimit)
		}
		q.Limit = n
	}
	for _, p := range []struct {
		name string
		to   *int64
	}{{"before", &q.Before}, {"after", &q.After}} {
		if v := c.QueryParam(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return q, badRequest("%s=%q: give the id of an event, a number >= 0", p.name, v)
			}
			*p.to = n
		}
	}
	switch o := c.QueryParam("order"); o {
	case "":
		q.Ascending = q.After > 0 || ndjson
	case "asc":
		q.Ascending = true
	case "desc":
		if ndjson {
			return q, badRequest("order=desc: JSON lines come oldest first; leave order out")
		}
	default:
		return q, badRequest("order=%q: give asc (oldest first) or desc (newest first, the default)", o)
	}
	return q, nil
}
