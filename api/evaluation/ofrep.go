package evaluation

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api/internal/jsonscan"
	"github.com/rollout/rollout/rollout/feature"
)

// The OpenFeature Remote Evaluation Protocol (OFREP v0.3.0, service/openapi.yaml
// of open-feature/protocol) is what OpenFeature's providers speak, so apps
// need no client of ours:
//
//	POST /ofrep/v1/evaluate/flags/{key}  {"context":{"targetingKey":"U",…}}
//	  → {"key","value","reason","variant","metadata":{"version":N}}
//	POST /ofrep/v1/evaluate/flags        {"context":{"targetingKey":"U","flags":[…]}}
//	  → {"flags":[…],"metadata":{"snapshot":"T"}} with the strong ETag "T"
//
// A flag whose answer cannot depend on the user or context (reason STATIC,
// or DISABLED) is answered without a targeting key too, as OpenFeature's
// evaluation suite expects; bulk requests still need one.
//
// The variant is the bucket and the value its value; the reason is the
// evaluation's feature.Evaluation.OpenFeatureReason, which the OpenFeature
// provider gives too (SPLIT for a ring assignment, TARGETING_MATCH for a
// rule or an override, DISABLED when the kill switch is off, …). A disabled feature with a fallback bucket serves it,
// as GET /evaluate does: the operator chose that bucket for everyone, and an
// app must get the same answer from either API. Without a fallback the
// answer has no value and no variant, which tells the provider to return the
// app's code default.
//
// The targeting key is the user ID; for bulk evaluation, the optional list
// context.flags names the flags; every other attribute of the context is
// read when a feature's rules or bucket_by use it (see context.go).
//
// A single evaluation without a targeting key answers for a feature whose
// answer no user ID can change (switched off; or no overrides and a ring of
// one bucket or bucketed by an attribute), as OpenFeature's evaluation suite
// expects; any other is TARGETING_KEY_MISSING, and so is a bulk evaluation
// without one. A single flag that does not exist is FLAG_NOT_FOUND whatever
// the request holds: it is looked up before the body is read.

// OFREP error codes, which package api's error handler answers with the
// protocol's statuses.
const (
	OFREPParseError          = "PARSE_ERROR"
	OFREPTargetingKeyMissing = "TARGETING_KEY_MISSING"
	OFREPInvalidContext      = "INVALID_CONTEXT"
	OFREPFlagNotFound        = "FLAG_NOT_FOUND"
)

// OFREPError is an OFREP failure, which package api's error handler answers
// in the protocol's shape: {"key","errorCode","errorDetails"} for one flag,
// and without the key for a bulk request.
type OFREPError struct {
	Key          string `json:"key,omitempty"`
	ErrorCode    string `json:"errorCode"`
	ErrorDetails string `json:"errorDetails"`
}

func (e *OFREPError) Error() string { return e.ErrorCode + ": " + e.ErrorDetails }

// readOFREP reads an OFREP evaluation request: the user ID from
// context.targetingKey and, for bulk (key ""), the optional context.flags.
// key is the flag of a single evaluation. An empty body is a request without
// context.
//
// A large body is read in a slot of costly evaluations, which sl then
// holds. The context's other attributes are read only when wants says a feature
// to evaluate uses them (nil otherwise). Without a targeting key the user
// is "" when keyless (nil for bulk) says the feature needs none.
func (s *Server) readOFREP(c echo.Context, sl *slot, key string, wants, keyless func() bool) (user string, flags *[]string, ctx feature.Context, err error) {
	buf := getBuffer()
	defer putBuffer(buf)
	if err := buf.readFrom(c.Request().Body); err != nil {
		if tooLarge, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return "", nil, nil, feature.Errorf(codeTooLarge, "the request body is larger than %d bytes", tooLarge.Limit)
		}
		return "", nil, nil, &OFREPError{Key: key, ErrorCode: OFREPParseError, ErrorDetails: "the request body could not be read"}
	}
	if len(buf.b) > costlyBodyBytes {
		if err := sl.take(c, s.costly); err != nil {
			return "", nil, nil, err
		}
	}
	withContext := wants()
	req, oe := parseOFREPBody(buf.b, key, withContext)
	if oe != nil && (oe.ErrorCode != OFREPTargetingKeyMissing || keyless == nil || !keyless()) {
		return "", nil, nil, oe
	}
	if withContext && len(req.context) > 0 && req.context[0] == '{' {
		if ctx, err = ofrepContext(req.context, req.text, key == "", key); err != nil {
			return "", nil, nil, err
		}
	}
	return req.user, req.flags, ctx, nil
}

// ofrepBody is what parseOFREPBody reads of an OFREP request's body.
type ofrepBody struct {
	user    string
	flags   *[]string // a bulk request's context.flags; nil: none
	context []byte    // the value of the member "context", raw; nil: none
	// text reads the strings of the context object: as substrings of
	// one copy of it (see jsonText), made once for the user ID, the flags
	// and the attributes, when they are read; else each a copy.
	text jsonText
}

// parseOFREP parses the body of an OFREP evaluation request; see readOFREP.
// Only context.targetingKey and, for bulk, context.flags are decoded, and the
// rest is only checked to be JSON, which takes no allocation: this is every
// evaluation's path. Keys match exactly, as decoding into a
// map[string]json.RawMessage does, and an object that repeats a key, at any
// depth, is refused (see jsonscan.RepeatedKey).
func parseOFREP(body []byte, key string) (string, *[]string, *OFREPError) {
	req, err := parseOFREPBody(body, key, false)
	return req.user, req.flags, err
}

// parseOFREPBody is parseOFREP, which also returns the raw context, for
// ofrepContext to read without looking for it again: with withContext, and
// for bulk requests, with the reader of its strings that made the user ID
// and the flags. On an error, the request has only the context found, and
// the reader of its strings once the context is known to be an object.
func parseOFREPBody(body []byte, key string, withContext bool) (req ofrepBody, _ *OFREPError) {
	fail := func(code, details string) (ofrepBody, *OFREPError) {
		return ofrepBody{context: req.context, text: req.text}, &OFREPError{Key: key, ErrorCode: code, ErrorDetails: details}
	}
	i := jsonscan.SkipSpace(body, 0)
	if i == len(body) {
		return fail(OFREPTargetingKeyMissing, "give the user's ID as context.targetingKey: every user gets a bucket of their own")
	}
	repeated, isRepeated, valid, plain := jsonscan.CheckPlain(body)
	if !valid {
		var v any
		return fail(OFREPParseError, "the request body is not JSON: "+json.Unmarshal(body, &v).Error())
	}
	if body[i] != '{' {
		return fail(OFREPParseError, `the request body must be an OFREP evaluation request {"context":{"targetingKey":"…"}}, not a JSON `+jsonType(body[i]))
	}
	if isRepeated {
		return fail(OFREPParseError, "key "+strconv.Quote(repeated)+" appears twice in one object: send each key once")
	}
	// No key repeats: the walks stop at what they look for.
	var ctxJSON, keyJSON, flagsJSON []byte
	for it := jsonscan.MembersAt(body, i); ctxJSON == nil && it.Next(); {
		if it.KeyIs("context") {
			ctxJSON = it.Value
		}
	}
	req.context = ctxJSON
	if ctxJSON == nil || ctxJSON[0] == 'n' {
		return fail(OFREPTargetingKeyMissing, "give the user's ID as context.targetingKey: every user gets a bucket of their own")
	}
	if ctxJSON[0] != '{' {
		return fail(OFREPInvalidContext, "context must be an object, not a JSON "+jsonType(ctxJSON[0]))
	}
	bulk := key == ""
	req.text.plain = plain
	if withContext || bulk {
		req.text = jsonStrings(ctxJSON, plain)
	}
	for it := jsonscan.MembersAt(ctxJSON, 0); (keyJSON == nil || bulk && flagsJSON == nil) && it.Next(); {
		switch {
		case it.KeyIs("targetingKey"):
			keyJSON = it.Value
		case bulk && it.KeyIs("flags"):
			flagsJSON = it.Value
		}
	}
	if keyJSON == nil || keyJSON[0] == 'n' {
		return fail(OFREPTargetingKeyMissing, "give the user's ID as context.targetingKey: every user gets a bucket of their own")
	}
	if keyJSON[0] != '"' {
		return fail(OFREPInvalidContext, "context.targetingKey must be a string, not a JSON "+jsonType(keyJSON[0]))
	}
	if !req.text.readable(keyJSON) {
		return fail(OFREPInvalidContext, "context.targetingKey: "+errUnreadableUser.Message)
	}
	if req.user = req.text.str(keyJSON); req.user == "" {
		return fail(OFREPTargetingKeyMissing, "give the user's ID as context.targetingKey: every user gets a bucket of their own")
	}
	if err := feature.ValidateUser(req.user); err != nil {
		return fail(OFREPInvalidContext, "context.targetingKey: "+feature.ErrorMessage(err))
	}
	if !bulk || flagsJSON == nil || flagsJSON[0] == 'n' {
		return req, nil
	}
	list := new([]string)
	var ok bool
	if *list, ok = stringList(flagsJSON, req.text); !ok && json.Unmarshal(flagsJSON, list) != nil {
		return fail(OFREPInvalidContext, "context.flags must be a list of flag keys")
	}
	if len(*list) > MaxBulkFeatures {
		return fail(OFREPInvalidContext, "context.flags names "+strconv.Itoa(len(*list))+" flags; at most "+strconv.Itoa(MaxBulkFeatures))
	}
	req.flags = list
	return req, nil
}

// The helpers below read JSON that json.Valid has accepted.

// jsonText reads the JSON strings within b: the value of one is a
// substring of text, a single copy of b, or, when it holds escapes or
// invalid UTF-8, its decoded value. Its zero value copies each string
// apart (jsonscan.String). It is a value, passed without allocating.
type jsonText struct {
	b    []byte
	text string
	// plain: every string of the body is plain (jsonscan.CheckPlain), its
	// value the bytes between its quotes, which need no second look.
	plain bool
}

// jsonStrings returns the jsonText of b, copying b once; plain says that
// every string of b is plain (jsonscan.CheckPlain).
func jsonStrings(b []byte, plain bool) jsonText {
	return jsonText{b: b, text: string(b), plain: plain}
}

// str returns the value of raw, a JSON string within t.b.
func (t jsonText) str(raw []byte) string {
	inner := raw[1 : len(raw)-1]
	switch {
	case t.b == nil && t.plain:
		return string(inner)
	case t.b == nil || !t.plain && (bytes.IndexByte(inner, '\\') >= 0 || !utf8.Valid(inner)):
		return jsonscan.String(raw)
	}
	at := cap(t.b) - cap(inner) // inner is b[at:…]
	return t.text[at : at+len(inner)]
}

// readable is readableString(raw), for a string within a plain body
// without looking at it.
func (t jsonText) readable(raw []byte) bool { return t.plain || readableString(raw) }

// stringList reads raw, a JSON array of strings, as json.Unmarshal reads it
// into a []string, without reflection; t reads each string (see
// jsonText). ok is false for any other value, which the caller leaves to
// encoding/json.
func stringList(raw []byte, t jsonText) (list []string, ok bool) {
	if raw[0] != '[' {
		return nil, false
	}
	// Room for every key allowed, in one allocation.
	list = make([]string, 0, min(bytes.Count(raw, []byte{','})+1, MaxBulkFeatures+1))
	for j := jsonscan.SkipSpace(raw, 1); raw[j] != ']'; {
		if raw[j] != '"' {
			return nil, false
		}
		end := jsonscan.StringEnd(raw, j)
		list = append(list, t.str(raw[j:end]))
		if j = jsonscan.SkipSpace(raw, end); raw[j] == ',' {
			j = jsonscan.SkipSpace(raw, j+1)
		}
	}
	return list, true
}

// readableString reports whether the raw JSON string decodes to exactly
// the text it holds: valid UTF-8, surrogates escaped only in pairs. Go's
// decoder replaces anything else with U+FFFD, which would make an invalid
// user ID a different, valid one.
func readableString(raw []byte) bool {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return true // no allocation, no second pass
	}
	return feature.ReadableJSON(raw)
}

// errUnreadableUser refuses a user ID that is not valid UTF-8, as
// feature.ValidateUser does once it is decoded.
var errUnreadableUser = feature.Errorf(feature.EInvalid, "user ID must be 1 to %d bytes of valid UTF-8", feature.MaxUserBytes)

func jsonType(first byte) string {
	switch first {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// OFREPEvaluate is POST /ofrep/v1/evaluate/flags/{key}. A flag that does
// not exist is FLAG_NOT_FOUND (404) whatever the request's context holds:
// the flag is looked up before the context is read.
func (s *Server) OFREPEvaluate(c echo.Context) error {
	key := c.Param("key")
	snap := s.snapshotState().snap
	if snap.Compiled(key) == nil {
		_, err := snap.Peek(key, "") // the snapshot's not-found error, which says what to do
		return &OFREPError{Key: key, ErrorCode: OFREPFlagNotFound, ErrorDetails: feature.ErrorMessage(err)}
	}
	var sl slot
	defer sl.release(s.costly)
	user, _, ctx, err := s.readOFREP(c, &sl, key, func() bool { return snap.UsesContext(key) }, func() bool { return ofrepKeyFree(snap, key) })
	if err != nil {
		return err
	}
	defer putContext(ctx)
	if snap.AnyCostly() && snap.Costly(key) {
		if err := sl.take(c, s.costly); err != nil {
			return err
		}
	}
	o, err := snap.EvaluateOutcomeContext(key, user, ctx)
	if err != nil {
		return err
	}
	a := answerOf(s.metrics, o)
	a.count.Inc()
	return blobJSON(c, a.ofrep)
}

// ofrepKeyFree reports whether the feature key of snap answers without a
// user ID: switched off; or no overrides and a ring that hashes no user ID,
// of one bucket or bucketed by an attribute (rules read the context's
// other attributes). It runs only for requests without a targeting key.
func ofrepKeyFree(snap *feature.Snapshot, key string) bool {
	f, ok := snap.Feature(key)
	if !ok {
		return false
	}
	if !f.Enabled {
		return true
	}
	serving := 0
	for _, b := range f.Buckets {
		if b.Replicas > 0 {
			serving++
		}
	}
	return len(f.Overrides) == 0 && len(f.Prerequisites) == 0 && (serving == 1 || f.BucketBy != "")
}

// OFREPEvaluateAll is POST /ofrep/v1/evaluate/flags: every feature, or those
// context.flags lists, for one user. Its strong ETag is the snapshot's tag
// followed by a hash of what of the request the answer depends on (the
// targeting key and context.flags), so it changes exactly when a feature
// changes, and a client that changes users cannot be told "not modified".
// metadata.snapshot is the same tag, unquoted: one value names the answer
// wherever a client reads it. If-None-Match with the current ETag answers
// 304 without evaluating.
func (s *Server) OFREPEvaluateAll(c echo.Context) error {
	st := s.snapshotState()
	var sl slot
	defer sl.release(s.costly)
	user, flags, ctx, err := s.readOFREP(c, &sl, "", st.snap.AnyUsesContext, nil)
	if err != nil {
		return err
	}
	defer putContext(ctx)
	etag := bulkETag(st, user, flags, ctx)
	c.Response().Header().Set("ETag", etag)
	if etagMatches(headerValue(c.Request().Header, "If-None-Match"), etag) {
		return c.NoContent(http.StatusNotModified)
	}
	keys := st.snap.Keys()
	if flags != nil {
		keys = *flags
	}
	buf := getBuffer()
	defer putBuffer(buf)
	b := append(buf.b, `{"flags":[`...)
	for i, key := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		if st.snap.AnyCostly() && st.snap.Costly(key) {
			if err := sl.take(c, s.costly); err != nil {
				return err
			}
		}
		o, err := st.snap.EvaluateOutcomeContext(key, user, ctx)
		if err != nil {
			b = appendOFREPFailure(b, key, OFREPFlagNotFound, feature.ErrorMessage(err))
			continue
		}
		a := answerOf(s.metrics, o)
		a.count.Inc()
		b = append(b, a.ofrep...)
	}
	b = append(b, `],"metadata":{"snapshot":`...)
	b = append(b, etag...) // quoted, as a JSON string: 32 hex digits need no escaping
	buf.b = append(b, `}}`...)
	return blobJSON(c, buf.b)
}

// bulkETag returns the strong ETag of a bulk evaluation: the snapshot's
// tag, then a hash of the user and the flags asked for. The hashes are
// xxHash's, which are the same in every process (unlike hash/maphash's), so
// that every instance gives the same answer the same tag.
func bulkETag(st *snapshotState, user string, flags *[]string, ctx feature.Context) string {
	var d xxhash.Digest
	d.Reset()
	d.WriteString(user)
	if flags != nil {
		d.WriteString("\x00flags")
		for _, f := range *flags {
			d.WriteString("\x00")
			d.WriteString(f)
		}
	}
	if len(ctx) > 0 {
		hashContext(&d, ctx)
	}
	h := d.Sum64()
	var b [2 + 16 + 16]byte
	b[0] = '"'
	copy(b[1:], st.etagTag())
	const digits = "0123456789abcdef"
	for i := range 16 {
		b[17+i] = digits[(h>>(60-4*i))&0xf]
	}
	b[33] = '"'
	return string(b[:])
}

// etagMatches reports whether the If-None-Match header value lists etag or
// is "*". It compares weakly, as RFC 9110 says for If-None-Match.
func etagMatches(header, etag string) bool {
	for header != "" {
		var tag string
		tag, header, _ = strings.Cut(header, ",")
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == etag || tag == "*" {
			return true
		}
	}
	return false
}

// appendOFREPEvaluation appends the OFREP success body of e.
func appendOFREPEvaluation(b []byte, e feature.Evaluation) []byte {
	b = append(b, `{"key":`...)
	b = appendJSONString(b, e.Feature)
	if e.Bucket != "" {
		b = append(b, `,"value":`...)
		b = append(b, e.Value...)
		b = append(b, `,"variant":`...)
		b = appendJSONString(b, e.Bucket)
	}
	b = append(b, `,"reason":"`...)
	b = append(b, e.OpenFeatureReason()...)
	b = append(b, `","metadata":{"version":`...)
	b = strconv.AppendInt(b, int64(e.Version), 10)
	if e.Rule != "" {
		b = append(b, `,"rule":`...)
		b = appendJSONString(b, e.Rule)
	}
	if e.Prerequisite != "" {
		b = append(b, `,"prerequisite":`...)
		b = appendJSONString(b, e.Prerequisite)
	}
	return append(b, "}}"...)
}

// appendOFREPFailure appends an OFREP failure entry of a bulk answer.
func appendOFREPFailure(b []byte, key, code, details string) []byte {
	b = append(b, `{"key":`...)
	b = appendJSONString(b, key)
	b = append(b, `,"errorCode":`...)
	b = appendJSONString(b, code)
	b = append(b, `,"errorDetails":`...)
	b = appendJSONString(b, details)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string, as encoding/json writes it
// (<, > and & escaped too). Feature keys and bucket names need no escaping,
// and take the fast path.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !jsonAsIs[s[i]] {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// jsonAsIs marks the bytes encoding/json writes as they are in a string:
// printable ASCII but the quote, the backslash, <, > and &.
var jsonAsIs = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// buffer is a reusable byte slice for reading request bodies and building
// answers without allocating on every request.
type buffer struct{ b []byte }

var buffers = sync.Pool{New: func() any { return &buffer{b: make([]byte, 0, 4<<10)} }}

// maxPooledBuffer keeps the rare large answer's memory out of the pool.
const maxPooledBuffer = 256 << 10

func getBuffer() *buffer { return buffers.Get().(*buffer) }

func putBuffer(buf *buffer) {
	if cap(buf.b) > maxPooledBuffer {
		return
	}
	buf.b = buf.b[:0]
	buffers.Put(buf)
}

// readFrom appends all of r to the buffer, the request body of an
// evaluation route: past MaxEvaluateBodyBytes it stops with an
// *http.MaxBytesError, as a body package api's limitBody bounds would (the
// routes that read their body here need no such bound: Route.BoundedRead).
func (buf *buffer) readFrom(r io.Reader) error {
	for {
		if len(buf.b) > MaxEvaluateBodyBytes {
			return &http.MaxBytesError{Limit: MaxEvaluateBodyBytes}
		}
		if len(buf.b) == cap(buf.b) {
			buf.b = append(buf.b, 0)[:len(buf.b)]
		}
		n, err := r.Read(buf.b[len(buf.b):min(cap(buf.b), MaxEvaluateBodyBytes+1)])
		buf.b = buf.b[:len(buf.b)+n]
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
