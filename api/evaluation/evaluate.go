package evaluation

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api/internal/jsonscan"
	"github.com/rollout/rollout/rollout/feature"
)

// MaxBulkFeatures bounds the features one POST /evaluate or OFREP bulk
// request may list; without a list, every feature is evaluated.
const MaxBulkFeatures = 1000

// MaxEvaluateBodyBytes bounds the request body of the evaluation routes
// (POST /evaluate and OFREP's), so that reading one costs little: a list
// of MaxBulkFeatures keys of 50 characters and a context of
// feature.MaxContextBytes fit.
const MaxEvaluateBodyBytes = 64 << 10

// Evaluation is every app's hot path, so its answers are written by hand
// into pooled buffers, byte for byte as encoding/json writes the types
// below (which ?pretty still uses), and its requests are read without
// decoding into maps; anything out of the ordinary takes the general path,
// which also words every error.

// JSON is the JSON of one evaluation, as GET /evaluate answers it (and
// package api's history of a user, for the bucket the user has now).
// Bucket and value are null when the feature serves no bucket.
type JSON struct {
	Feature string          `json:"feature"`
	User    string          `json:"user"`
	Bucket  *string         `json:"bucket"`
	Value   json.RawMessage `json:"value"`
	Version int             `json:"version"`
	Reason  string          `json:"reason"`
	Rule    string          `json:"rule,omitempty"` // the rule that served (reason targeting_match)
	// Prerequisite names the prerequisite that failed (reason
	// prerequisite_failed).
	Prerequisite string `json:"prerequisite,omitempty"`
}

// JSONOf returns the JSON of e.
func JSONOf(e feature.Evaluation) JSON {
	out := JSON{Feature: e.Feature, User: e.User, Value: e.Value, Version: e.Version, Reason: e.Reason, Rule: e.Rule, Prerequisite: e.Prerequisite}
	if e.Bucket != "" {
		out.Bucket = &e.Bucket
	} else {
		out.Value = json.RawMessage("null")
	}
	return out
}

// appendEvaluation appends the JSON of JSONOf(e). The hot paths
// append an answer's parts instead (see answer), which make the same bytes.
func appendEvaluation(b []byte, e feature.Evaluation) []byte {
	b = append(b, `{"feature":`...)
	b = appendJSONString(b, e.Feature)
	b = append(b, `,"user":`...)
	b = appendJSONString(b, e.User)
	return appendEvaluationTail(b, e)
}

// indented reports whether the answer is to be indented, as echo's
// Context.JSON indents it: in debug mode, or when the query has "pretty".
func indented(c echo.Context, pretty bool) bool { return pretty || c.Echo().Debug }

// EvaluateOne is GET /evaluate?feature=K&user=U, with the context's
// attributes as ctx.NAME=VALUE parameters. A long query, or a costly
// feature, is read and evaluated in a slot of costly evaluations.
func (s *Server) EvaluateOne(c echo.Context) error {
	key, user, pretty := evaluateQuery(c)
	if key == "" || user == "" {
		return badRequest("give both query parameters: /evaluate?feature=KEY&user=USER_ID")
	}
	if err := feature.ValidateUser(user); err != nil {
		return err
	}
	snap := s.snapshotState().snap
	raw := c.Request().URL.RawQuery
	if len(raw) > costlyBodyBytes || snap.AnyCostly() && snap.Costly(key) {
		var sl slot
		if err := sl.take(c, s.costly); err != nil {
			return err
		}
		defer sl.release(s.costly)
	}
	var ctx feature.Context
	if hasQueryContext(raw) {
		var err error
		if ctx, err = queryContext(c); err != nil {
			return err
		}
	}
	o, err := snap.EvaluateOutcomeContext(key, user, ctx)
	if err != nil {
		return err
	}
	a := answerOf(s.metrics, o)
	a.count.Inc()
	if indented(c, pretty) {
		return c.JSON(http.StatusOK, JSONOf(o.Evaluation(user)))
	}
	buf := getBuffer()
	defer putBuffer(buf)
	buf.b = append(a.appendFor(buf.b, user), '\n')
	return blobJSON(c, buf.b)
}

// hasPretty reports whether the query has a parameter pretty.
func hasPretty(c echo.Context) bool {
	if c.Request().URL.RawQuery == "" {
		return false
	}
	_, ok := c.QueryParams()["pretty"]
	return ok
}

// maxFastQueryParams bounds the query parameters evaluateQuery reads
// itself; url.ParseQuery reads longer queries, within its own limit.
const maxFastQueryParams = 64

// evaluateQuery returns the first values of the query parameters feature
// and user, and whether the query has a parameter pretty, as the request's
// url.Values would have them, without making them: the pairs are cut at
// each '&' and '=' (bytes.IndexByte's search), and unescaped only when the
// query holds an escape.
func evaluateQuery(c echo.Context) (feature, user string, pretty bool) {
	raw := c.Request().URL.RawQuery
	if strings.IndexByte(raw, ';') >= 0 || strings.Count(raw, "&") >= maxFastQueryParams {
		return evaluateQueryValues(c)
	}
	escapes := strings.IndexByte(raw, '%') >= 0 || strings.IndexByte(raw, '+') >= 0
	var haveFeature, haveUser bool
	for raw != "" {
		var k, v string
		k, raw, _ = strings.Cut(raw, "&")
		k, v, _ = strings.Cut(k, "=")
		if k == "" && v == "" {
			continue
		}
		if escapes {
			var ok bool
			if k, ok = queryUnescape(k); !ok {
				continue
			}
			if v, ok = queryUnescape(v); !ok {
				continue
			}
		}
		switch {
		case k == "feature" && !haveFeature:
			feature, haveFeature = v, true
		case k == "user" && !haveUser:
			user, haveUser = v, true
		case k == "pretty":
			pretty = true
		}
	}
	return feature, user, pretty
}

// evaluateQueryValues is evaluateQuery through the request's url.Values,
// for queries out of the ordinary: with a semicolon, or long.
func evaluateQueryValues(c echo.Context) (feature, user string, pretty bool) {
	q := c.QueryParams()
	_, pretty = q["pretty"]
	return q.Get("feature"), q.Get("user"), pretty
}

// queryUnescape is url.QueryUnescape, which allocates only for escapes.
func queryUnescape(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s, true
	}
	u, err := url.QueryUnescape(s)
	return u, err == nil
}

type evaluateRequest struct {
	User     string    `json:"user"`
	Features *[]string `json:"features"`
	// Context is the attributes besides the user ID (see context.go),
	// as encoding/json decodes them; contextJSON is the raw object instead
	// when parseEvaluateRequest read the body, for readContext to read with
	// text, the reader of the body's strings.
	Context map[string]any `json:"context"`
	// Explain asks for each answer's explanation (see explain.go).
	Explain     bool `json:"explain"`
	contextJSON []byte
	text        jsonText
	// userUnreadable is set when the user's JSON string holds invalid
	// UTF-8 or a lone surrogate, which decoding replaced.
	userUnreadable bool
}

type evaluateResult struct {
	*JSON
	Error *errorDetail `json:"error,omitempty"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// EvaluateMany is POST /evaluate: several features for one user, each
// once. A feature that cannot be evaluated is an error entry of its own,
// never a failed request. A large body, and each costly feature, is read
// and evaluated in a slot of costly evaluations.
func (s *Server) EvaluateMany(c echo.Context) error {
	buf := getBuffer()
	defer putBuffer(buf)
	var sl slot
	defer sl.release(s.costly)
	readErr := buf.readFrom(c.Request().Body)
	if len(buf.b) > costlyBodyBytes {
		if err := sl.take(c, s.costly); err != nil {
			return err
		}
	}
	req, err := s.readEvaluateRequest(c, buf, readErr)
	if err != nil {
		return err
	}
	if req.userUnreadable {
		return errUnreadableUser
	}
	if err := feature.ValidateUser(req.User); err != nil {
		return err
	}
	var ctx feature.Context
	switch {
	case req.contextJSON != nil:
		var details string
		if ctx, details = readContext(req.contextJSON, req.text, nil); details != "" {
			return feature.Errorf(feature.EInvalid, "%s", details)
		}
		defer putContext(ctx)
	case req.Context != nil:
		if ctx, err = feature.ContextFromJSON(req.Context); err != nil {
			return err
		}
	}
	st := s.snapshotState()
	keys := st.snap.Keys() // all of them, however many, sorted and once each
	if req.Features != nil {
		keys = *req.Features
		if len(keys) > MaxBulkFeatures {
			return feature.Errorf(feature.EInvalid, "at most %d features in one request, got %d: leave out \"features\" to evaluate all of them", MaxBulkFeatures, len(keys))
		}
		if !slices.IsSorted(keys) {
			slices.Sort(keys)
		}
		keys = slices.Compact(keys)
	}
	if req.Explain {
		if err := sl.take(c, s.costly); err != nil {
			return err
		}
		return s.explainMany(c, st.snap, req, keys, ctx)
	}
	results := getResults()
	defer putResults(results)
	for _, key := range keys {
		if st.snap.AnyCostly() && st.snap.Costly(key) {
			if err := sl.take(c, s.costly); err != nil {
				return err
			}
		}
		o, err := st.snap.EvaluateOutcomeContext(key, req.User, ctx)
		if err != nil {
			results.add(key, nil, &errorDetail{Code: feature.ErrorCode(err), Message: feature.ErrorMessage(err)})
			continue
		}
		a := answerOf(s.metrics, o)
		a.count.Inc()
		results.add(key, a, nil)
	}
	if indented(c, hasPretty(c)) {
		return c.JSON(http.StatusOK, map[string]any{"user": req.User, "results": results.json(req.User)})
	}
	// The request is read: its buffer takes the answer, and the user's
	// JSON string, written once, follows it for the entries to copy.
	b := appendJSONString(buf.b[:0], req.User)
	n := len(b)
	b = append(b, `{"results":`...)
	b = append(results.appendJSON(b, b[:n]), `,"user":`...)
	buf.b = append(append(b, b[:n]...), "}\n"...)
	return blobJSON(c, buf.b[n:])
}

// readEvaluateRequest reads the body of POST /evaluate, which buf holds as
// far as it was read (readErr stopped the reading, or nil). A body of
// the usual shape, {"user":"…","features":["…",…],"context":{…}} in any
// order, any member absent, features or context null, is parsed here; any
// other is decoded by Options.Decode, which words what is wrong with it.
func (s *Server) readEvaluateRequest(c echo.Context, buf *buffer, readErr error) (evaluateRequest, error) {
	r := c.Request()
	if readErr == nil {
		if req, ok := parseEvaluateRequest(buf.b); ok {
			return req, nil
		}
	}
	// Decode reads what was read, then the error that stopped the reading.
	rest := io.Reader(bytes.NewReader(buf.b))
	if readErr != nil {
		rest = io.MultiReader(rest, errReader{readErr})
	}
	r.Body = io.NopCloser(rest)
	var req evaluateRequest
	if err := s.decode(c, &req); err != nil {
		return req, err
	}
	// Decode matched the members as encoding/json does (case aside): the
	// user's raw string is the one it decoded.
	var raw struct{ User json.RawMessage }
	if json.Unmarshal(buf.b, &raw) == nil && len(raw.User) > 0 && raw.User[0] == '"' {
		req.userUnreadable = !readableString(raw.User)
	}
	return req, nil
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// parseEvaluateRequest parses a body of the usual shape; see
// readEvaluateRequest. The user and keys are substrings of one copy of
// body, or decoded strings when they hold escapes; a context object is
// left raw (contextJSON), a sub-slice of body. A body that repeats a key
// anywhere goes to decode, which refuses it.
func parseEvaluateRequest(body []byte) (evaluateRequest, bool) {
	var req evaluateRequest
	i := jsonscan.SkipSpace(body, 0)
	if i == len(body) || body[i] != '{' {
		return req, false
	}
	_, repeated, valid, plain := jsonscan.CheckPlain(body)
	if !valid || repeated {
		return req, false
	}
	req.text = jsonStrings(body, plain)
	var user, features, context bool
	for it := jsonscan.MembersAt(body, i); it.Next(); {
		switch {
		case it.KeyIs("context") && it.Value[0] == 'n' && !context:
			context = true
		case it.KeyIs("context") && it.Value[0] == '{' && !context:
			req.contextJSON, context = it.Value, true
		case it.KeyIs("user") && it.Value[0] == '"' && !user:
			req.User, req.userUnreadable = req.text.str(it.Value), !req.text.readable(it.Value)
			user = true
		case it.KeyIs("features") && it.Value[0] == 'n' && !features:
			req.Features, features = nil, true
		case it.KeyIs("features") && it.Value[0] == '[' && !features:
			list, ok := stringList(it.Value, req.text)
			if !ok {
				return req, false
			}
			req.Features, features = &list, true
		default:
			return req, false
		}
	}
	return req, true
}

// results are the entries of a bulk evaluation, in the order of their
// keys, sorted and once each.
type results struct{ entries []result }

type result struct {
	key string
	a   *answer // nil when err is set
	err *errorDetail
}

var resultPool = sync.Pool{New: func() any { return new(results) }}

// maxPooledResults keeps the rare huge list out of the pool.
const maxPooledResults = 1024

func getResults() *results { return resultPool.Get().(*results) }

func putResults(r *results) {
	if cap(r.entries) > maxPooledResults {
		return
	}
	clear(r.entries)
	r.entries = r.entries[:0]
	resultPool.Put(r)
}

func (r *results) add(key string, a *answer, err *errorDetail) {
	r.entries = append(r.entries, result{key: key, a: a, err: err})
}

// json returns the entries, for user, as encoding/json is to write them.
func (r *results) json(user string) map[string]evaluateResult {
	out := make(map[string]evaluateResult, len(r.entries))
	for _, en := range r.entries {
		if en.err != nil {
			out[en.key] = evaluateResult{Error: en.err}
			continue
		}
		e := en.a.e
		e.User = user
		ev := JSONOf(e)
		out[en.key] = evaluateResult{JSON: &ev}
	}
	return out
}

// appendJSON appends the JSON of r.json(), for the user whose JSON string
// is user.
func (r *results) appendJSON(b, user []byte) []byte {
	b = append(b, '{')
	for i, en := range r.entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendJSONString(b, en.key), ':')
		if en.err != nil {
			b = append(b, `{"error":{"code":`...)
			b = appendJSONString(b, en.err.Code)
			b = append(b, `,"message":`...)
			b = append(appendJSONString(b, en.err.Message), "}}"...)
			continue
		}
		b = en.a.appendTo(b, user)
	}
	return append(b, '}')
}

// appendRawJSON appends v as encoding/json writes a json.RawMessage:
// compacted, with <, > and & escaped. Bucket values are stored compacted,
// and most need nothing done.
func appendRawJSON(b []byte, v json.RawMessage) []byte {
	if len(v) == 0 {
		return append(b, "null"...)
	}
	inString, escaped := false, false
	for _, c := range v {
		switch {
		case c == '<' || c == '>' || c == '&' || c >= 0x80:
			return appendMarshaled(b, v)
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return appendMarshaled(b, v)
		}
	}
	return append(b, v...)
}

func appendMarshaled(b []byte, v json.RawMessage) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		return append(b, v...) // stored values are valid JSON
	}
	return append(b, out...)
}

// blobJSON answers 200 with the JSON b, as c.Blob does, setting the
// Content-Type to a value shared by every answer rather than one allocated
// for each, and without c.Blob's look-up of a Content-Type set already.
func blobJSON(c echo.Context, b []byte) error {
	res := c.Response()
	if h := res.Header(); len(h[echo.HeaderContentType]) == 0 {
		h[echo.HeaderContentType] = contentTypeJSON
	}
	res.WriteHeader(http.StatusOK)
	_, err := res.Write(b)
	return err
}

// contentTypeJSON's length is its capacity, so an append to it copies it,
// and nothing writes into a header's values.
var contentTypeJSON = []string{echo.MIMEApplicationJSON}
