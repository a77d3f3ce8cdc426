package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/rollout/ramp"
)

// Idempotency keys, as Stripe's API has them: a change request (POST, PUT,
// PATCH or DELETE under /api/ that needs a write token: not the read-only
// plan and preview, nor apps' exposures) may carry an Idempotency-Key
// header of up to idempotency.MaxKey printable ASCII bytes. The
// first request with a key runs; its answer, if a success, is kept for
// idempotency.Memory in the database — in the same transaction as
// the change it answers, so that a change committed after its client gave
// up has its answer kept too — and every retry with the key, on any
// instance, gets that answer again, with Idempotent-Replayed: true, and
// changes nothing. Keys are the token's own. A retry must be the same
// request (method, route, path, query, If-Match and body): another one
// with the key is refused with 422. A retry while the first request still
// runs is refused with 409. A request that fails (any error answer) keeps
// nothing: it may be sent again with the same key.
//
// The middleware (idempotency) claims the key and hands the claim to the
// handler in the echo.Context; the handler passes it to its change in the
// change's options (answerer.idempotency), with the function that makes
// its answer. The service makes that answer, once, for the store write
// that commits the change, which keeps it with the key; the handler then
// sends that same answer (answerer.send). The middleware keeps the answer
// of a request whose change kept none (a dry run, a change that does not
// take the key), as it was sent.
const (
	idempotencyHeader = "Idempotency-Key"
	replayedHeader    = "Idempotent-Replayed"
	claimKey          = "rollout.idempotency" // echo.Context key of the request's *keyClaim
)

// maxKeptBody bounds the body of a kept answer: a larger one (a feature
// with very many overrides) is kept without its body, replaced by a note.
const maxKeptBody = 1 << 20

// idempotentRoute reports whether route takes an Idempotency-Key: the API's
// routes that change something, and need a write (or admin) token for it.
// POST /api/exposures, which apps send with their evaluation token, takes
// none: its batches carry their own ID, which makes a resent batch count
// once, and a token that browsers may hold must not fill a table of keys.
func idempotentRoute(route Route) bool {
	switch route.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return false
	}
	// A new token's answer holds its secret, which is shown once and
	// never stored: its route keeps no answer; nor do webhooks' (a new
	// webhook's answer holds its secret).
	if route.Path == "/api/tokens" || strings.HasPrefix(route.Path, "/api/webhooks") {
		return false
	}
	return strings.HasPrefix(route.Path, "/api/") && (route.Access == auth.PermWrite || route.Access == auth.PermAdmin)
}

// keptAnswer is a change's answer as kept for its Idempotency-Key: status, the
// headers a client reads (ETag), and the JSON body.
type keptAnswer struct {
	Status int               `json:"status"`
	Header map[string]string `json:"header,omitempty"`
	Body   []byte            `json:"body,omitempty"`
}

// jsonAnswer is the answer of status with v as its body, encoded as echo's
// c.JSON encodes it.
func jsonAnswer(status int, v any) (keptAnswer, error) {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		return keptAnswer{}, err
	}
	return keptAnswer{Status: status, Body: b.Bytes()}, nil
}

// resultAnswer is the answer of a change with its result: the feature, the
// report and, unless a dry run, the feature's ETag.
func resultAnswer(status int, res rollout.Result) (keptAnswer, error) {
	if res.Request != nil { // not applied: stored as a change request
		status = http.StatusAccepted
	}
	a, err := jsonAnswer(status, changeResponse{Feature: newView(res.Feature, res.Shares), Report: res.Report, DryRun: res.DryRun, Request: res.Request, Needs: res.Needs, Elsewhere: res.Elsewhere, Unchanged: res.Unchanged})
	if err == nil && !res.DryRun && res.Request == nil {
		a.Header = map[string]string{"ETag": etag(res.Feature)}
	}
	return a, err
}

// rampAnswer is the answer of a change of a ramp.
func rampAnswer(status int) func(ramp.Ramp) (keptAnswer, error) {
	return func(r ramp.Ramp) (keptAnswer, error) { return jsonAnswer(status, map[string]any{"ramp": r}) }
}

// send writes a.
func (a keptAnswer) send(c echo.Context) error {
	for name, v := range a.Header {
		c.Response().Header().Set(name, v)
	}
	if len(a.Body) == 0 {
		return c.NoContent(a.Status)
	}
	return c.Blob(a.Status, echo.MIMEApplicationJSON, a.Body)
}

// encode returns a as kept in the database, its body replaced by a note
// when larger than maxKeptBody.
func (a keptAnswer) encode() ([]byte, error) {
	if len(a.Body) > maxKeptBody {
		note, err := jsonAnswer(a.Status, map[string]any{"replayed_without_body": true,
			"message": fmt.Sprintf("the first answer to this request succeeded, but its body (%d bytes) was too large to keep: read the current state instead", len(a.Body))})
		if err != nil {
			return nil, err
		}
		a.Body = note.Body
	}
	return json.Marshal(a)
}

// keyClaim is a request's claim on its Idempotency-Key, which the
// idempotency middleware makes, and the answer its change kept with it.
type keyClaim struct {
	idempotency.Claim
	kept *keptAnswer // the answer last made for the change to keep; nil: none
}

// answerer answers a change with the answer f makes of its result, made
// once: when the request has an Idempotency-Key, the change's store write
// keeps that answer with the key, and it is that answer that send sends.
type answerer[T any] struct {
	c     echo.Context
	f     func(T) (keptAnswer, error)
	claim *keyClaim // nil: the request has no Idempotency-Key
}

// answers returns the answerer of the change c makes, whose result is a T
// answered as f answers it.
func answers[T any](c echo.Context, f func(T) (keptAnswer, error)) answerer[T] {
	claim, _ := c.Get(claimKey).(*keyClaim)
	return answerer[T]{c: c, f: f, claim: claim}
}

// idempotency returns the request's Idempotency-Key for the change's
// options (see idempotency.Key), nil when it has none. Its Answer
// makes the answer of the change's result, which must be a T.
func (a answerer[T]) idempotency() *idempotency.Key {
	if a.claim == nil {
		return nil
	}
	return &idempotency.Key{Claim: a.claim.Claim, Answer: func(v any) ([]byte, error) {
		t, ok := v.(T)
		if !ok {
			return nil, fmt.Errorf("the change answered a %T, not a %T", v, t)
		}
		ans, err := a.f(t)
		if err != nil {
			return nil, err
		}
		kept, err := ans.encode()
		if err != nil {
			return nil, err
		}
		a.claim.kept = &ans
		return kept, nil
	}}
}

// send answers the change, whose result is res: with the answer the
// change kept with the request's Idempotency-Key, if it kept one, else
// with f's answer to res.
func (a answerer[T]) send(res T) error {
	if a.claim != nil && a.claim.kept != nil {
		return a.claim.kept.send(a.c)
	}
	ans, err := a.f(res)
	if err != nil {
		return err
	}
	return ans.send(a.c)
}

// idempotency is the middleware that gives change routes (idempotentRoute)
// their Idempotency-Key: it claims the key (or answers with the key's
// first answer, 422 or 409), runs the request with the claim in its
// echo.Context (for answers), then keeps the answer of a request whose
// change did not keep it (a dry run), or gives the key up if the request
// failed.
func (s *Server) idempotency(route Route) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc { return s.idempotent(route, next) }
}

func (s *Server) idempotent(route Route, next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		keys := r.Header.Values(idempotencyHeader)
		switch {
		case len(keys) == 0:
			return next(c)
		case len(keys) > 1:
			return badRequest("%s is given %d times: send it once", idempotencyHeader, len(keys))
		}
		key := keys[0]
		if err := validIdempotencyKey(key); err != nil {
			return err
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return decodeError(err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		scope := ""
		if tok, ok := TokenOf(c); ok {
			scope = tok.ID
		}
		claim, first, err := s.in(c).ClaimIdempotency(r.Context(), scope, key, fingerprint(c, route, body))
		if err != nil {
			return err
		}
		if claim == nil {
			var a keptAnswer
			if err := json.Unmarshal(first, &a); err != nil {
				return fmt.Errorf("decode the answer kept for Idempotency-Key %q: %w", key, err)
			}
			c.Response().Header().Set(replayedHeader, "true")
			return a.send(c)
		}
		kc := &keyClaim{Claim: *claim}
		c.Set(claimKey, kc)
		rec := &recorder{ResponseWriter: c.Response().Writer}
		c.Response().Writer = rec
		err = next(c)
		c.Response().Writer = rec.ResponseWriter
		// The request may have ended (its client gone): keep or release the
		// key all the same, within the store's own timeout.
		ctx := context.WithoutCancel(r.Context())
		status := c.Response().Status
		switch {
		case kc.kept != nil && err == nil:
			// The change committed that answer with the key (the promise
			// of idempotency.Key), and it was sent.
		case err == nil && status >= 200 && status < 300:
			a := keptAnswer{Status: status, Body: rec.body.Bytes()}
			if tag := c.Response().Header().Get("ETag"); tag != "" {
				a.Header = map[string]string{"ETag": tag}
			}
			if rec.over {
				a.Body = make([]byte, maxKeptBody+1) // encode replaces it with its note
			}
			kept, encErr := a.encode()
			if encErr == nil {
				encErr = s.in(c).CompleteIdempotency(ctx, claim, kept)
			}
			if encErr != nil {
				s.log.Warn("keep the answer of an Idempotency-Key", "request_id", c.Response().Header().Get(echo.HeaderXRequestID), "err", encErr)
			}
		default:
			if relErr := s.in(c).ReleaseIdempotency(ctx, claim); relErr != nil {
				s.log.Warn("release an Idempotency-Key", "request_id", c.Response().Header().Get(echo.HeaderXRequestID), "err", relErr)
			}
		}
		return err
	}
}

// validIdempotencyKey refuses a key that is empty, too long or not
// printable ASCII.
func validIdempotencyKey(key string) error {
	if key == "" || len(key) > idempotency.MaxKey {
		return badRequest("%s must be 1 to %d characters long, got %d: use a random value such as a UUID", idempotencyHeader, idempotency.MaxKey, len(key))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return badRequest("%s must be printable ASCII: use a random value such as a UUID", idempotencyHeader)
		}
	}
	return nil
}

// fingerprint hashes what makes a request the same request: its method,
// route, path parameters, query, If-Match and body.
func fingerprint(c echo.Context, route Route, body []byte) string {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
	field(route.Method)
	field(route.Path)
	for _, name := range c.ParamNames() {
		field(name)
		field(c.Param(name))
	}
	field(c.Request().URL.RawQuery)
	field(strings.Join(c.Request().Header.Values("If-Match"), ","))
	if env := environmentOf(c); env != rollout.Production {
		field("env=" + env) // production's as before environments, so that keys kept then still match
	}
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// recorder keeps a copy of the body written through it, up to
// maxKeptBody bytes.
type recorder struct {
	http.ResponseWriter
	body bytes.Buffer
	over bool
}

func (w *recorder) Write(b []byte) (int, error) {
	if !w.over {
		if w.body.Len()+len(b) > maxKeptBody {
			w.over = true
			w.body = bytes.Buffer{}
		} else {
			w.body.Write(b)
		}
	}
	return w.ResponseWriter.Write(b)
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
