package api

import (
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/rollout/rollout/rollout"
)

// maxRequestID bounds an X-Request-ID the API honours.
const maxRequestID = 128

// Every request has an ID, echoed in the X-Request-ID response header and
// logged with everything the request causes: the request's own X-Request-ID
// when it is 1 to 128 printable ASCII characters (so a proxy's or an app's
// ID follows the request), a new random one otherwise. An app's request
// (evaluation, OFREP, sync, exposures: the routes whose Access is ForApps)
// that did not send one gets one only when something is to refer to it: an
// error answer, or a request logged whatever its outcome (--log-requests
// all, or sampled). The others, tens of thousands a second and logged
// nowhere, carry none, which spares the hot path a header.

// sentRequestID returns the request's own X-Request-ID as a header value,
// if it is one to honour.
func sentRequestID(r *http.Request) ([]string, bool) {
	// echo.HeaderXRequestID is in canonical form: no need for Get.
	if sent := r.Header[echo.HeaderXRequestID]; len(sent) > 0 && validRequestID(sent[0]) {
		return sent[:1:1], true // shared, with no room to append into
	}
	return nil, false
}

// giveRequestID gives the answer an ID if it has none yet.
func giveRequestID(res *echo.Response) {
	if h := res.Header(); len(h[echo.HeaderXRequestID]) == 0 {
		h[echo.HeaderXRequestID] = newRequestID()
	}
}

// requestIDLen is the length of the IDs newRequestID makes.
const requestIDLen = 26

// newRequestID returns a header value of one new request ID: 26 random
// characters of the RFC 4648 base32 alphabet, as crypto/rand.Text makes,
// from math/rand/v2's generator: a request ID need only be unique, not
// secret, and this one costs no system call. IDs are made a batch at a
// time, so that one costs no allocation of its own: the value is one
// element of the batch's array, with no room to append into.
func newRequestID() []string {
	b := idBatches.Get().(*idBatch)
	if b.next == len(b.values) {
		b = newIDBatch()
	}
	v := b.values[b.next : b.next+1 : b.next+1]
	b.next++
	idBatches.Put(b)
	return v
}

// idBatch is a batch of request IDs, as header values, and how many of them
// are handed out.
type idBatch struct {
	values [64]string // substrings of one string
	next   int
}

var idBatches = sync.Pool{New: func() any { return newIDBatch() }}

func newIDBatch() *idBatch {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b := new(idBatch)
	var chars [len(b.values) * requestIDLen]byte
	for i := 0; i < len(chars); i += requestIDLen {
		id := chars[i : i+requestIDLen]
		x, y := rand.Uint64(), rand.Uint64()
		for j := range 12 { // 12 characters of 5 bits from each 64
			id[j], id[j+12] = alphabet[x&31], alphabet[y&31]
			x, y = x>>5, y>>5
		}
		z := rand.Uint64()
		id[24], id[25] = alphabet[z&31], alphabet[z>>5&31]
	}
	all := string(chars[:])
	for i := range b.values {
		b.values[i] = all[i*requestIDLen : (i+1)*requestIDLen]
	}
	return b
}

func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// observe gives the request its ID (see above), answers its error if any,
// then counts it in the metrics by the route pattern it matched, and logs
// one line for it if s.reqlog says so: by default not for evaluations,
// which are too many. The logger's writer is the one to keep writes off the
// request's path (see package internal/logwriter). The middleware of a
// declared route keeps the metrics of its 200 answers once looked up.
func (s *Server) observe(ri Route, declared bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		var ok atomic.Pointer[requestMetrics] // of this route's 200 answers
		return s.observed(ri, declared, &ok, next)
	}
}

func (s *Server) observed(ri Route, declared bool, ok *atomic.Pointer[requestMetrics], next echo.HandlerFunc) echo.HandlerFunc {
	route := ri.Path
	app := ri.Access.ForApps()
	return func(c echo.Context) error {
		start := time.Now()
		r, res := c.Request(), c.Response()
		sampled := app && s.reqlog.sampled()
		if id, sent := sentRequestID(r); sent {
			res.Header()[echo.HeaderXRequestID] = id
		} else if !app || sampled || s.reqlog.mode == LogAll {
			res.Header()[echo.HeaderXRequestID] = newRequestID()
		}
		if err := next(c); err != nil {
			giveRequestID(res)
			c.Error(err)
		}
		d := time.Since(start)
		if declared && res.Status == http.StatusOK && r.Method == ri.Method {
			s.metrics.answeredOK(ok, r.Method, route, d)
		} else {
			s.metrics.answered(r.Method, route, res.Status, d)
		}
		if !s.reqlog.logs(r.Method, ri.Access, res.Status, d, sampled) {
			return nil
		}
		// A slow answer of an app's route has been sent without an ID: the
		// log line's is its own.
		giveRequestID(res)
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("request_id", res.Header().Get(echo.HeaderXRequestID)),
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("route", route),
			slog.Int("status", res.Status), slog.Int64("bytes", res.Size), slog.Duration("duration", d))
		return nil
	}
}

// evaluationCORS lets browser apps on other origins call the evaluation
// endpoints (/evaluate and /ofrep/…), as OpenFeature's web provider does,
// and read the ETag of bulk evaluation. They change nothing, and take a
// token in a header rather than a cookie, so any origin may call them. The
// rest of the API stays same-origin. Only a request with an Origin header,
// or a preflight, goes through echo's CORS middleware, which answers it
// with "Vary: Origin". Apps' servers send neither, and their answers get
// no Vary: no cache reuses them for another request (they carry no
// freshness nor Last-Modified, and the OFREP bulk answer that has an ETag
// is a POST's), so Vary would be a header the hot path writes for nothing.
func evaluationCORS() echo.MiddlewareFunc {
	cors := middleware.CORSWithConfig(middleware.CORSConfig{
		AllowOrigins:  []string{"*"},
		AllowMethods:  []string{http.MethodGet, http.MethodPost},
		AllowHeaders:  []string{echo.HeaderContentType, "If-None-Match", echo.HeaderAuthorization, "X-API-Key", echo.HeaderXRequestID},
		ExposeHeaders: []string{"ETag", echo.HeaderXRequestID},
		MaxAge:        2 * 60 * 60,
	})
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		withCORS := cors(next)
		return func(c echo.Context) error {
			r := c.Request()
			if path := r.URL.Path; path != "/evaluate" && path != "/api/track" && !strings.HasPrefix(path, "/ofrep/") {
				return next(c)
			}
			if r.Method == http.MethodOptions || headerValue(r.Header, echo.HeaderOrigin) != "" {
				return withCORS(c)
			}
			return next(c)
		}
	}
}

const changeKindKey = "rollout.change" // echo.Context key of the route's Change

// changeKind is the middleware that tells applied the kind of change its
// route applies (Route.Change).
func changeKind(kind string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set(changeKindKey, kind)
			return next(c)
		}
	}
}

// applied logs and counts a change the request applied (not a dry run): the
// feature's new version (for a deletion, the version deleted), its summary,
// the fraction of users it moved and who made it.
func (s *Server) applied(c echo.Context, feature string, version int, summary string, churn float64, actor string) {
	kind, ok := c.Get(changeKindKey).(string)
	if !ok {
		kind = "other"
	}
	if actor == "" {
		actor = "anonymous"
	}
	s.metrics.changed(kind)
	s.eval.Snapshot() // see the swap now, for the snapshot's age
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "change",
		slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)),
		slog.String("kind", kind), slog.String("feature", feature), slog.Int("version", version),
		slog.String("summary", summary), slog.Float64("churn", churn), slog.String("actor", actor))
}

// appliedResult logs and counts the change of a mutation's result, unless it
// was a dry run.
func (s *Server) appliedResult(c echo.Context, summary string, opts rollout.ChangeOptions, res rollout.Result) {
	if !res.DryRun && res.Request == nil && !res.Unchanged {
		s.applied(c, res.Feature.Key, res.Feature.Version, summary, res.Report.Churn, opts.Actor)
	}
}
