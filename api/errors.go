package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api/evaluation"
	"github.com/rollout/rollout/api/internal/jsonscan"
	"github.com/rollout/rollout/rollout/environment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
)

// API-level error codes, beside the domain's.
const (
	codeBadRequest   = "bad_request"
	codeTooLarge     = "too_large"
	codeForbidden    = feature.EForbidden
	codeUnauthorized = "unauthorized"
)

// statusOf is the one map from error codes to HTTP statuses, which every
// error answer follows (docs/api.md, Errors): each code has one status,
// and no handler answers a code with another. The status says who refused
// the request: 400 bad_request when the API could not read it as its
// route's form (not JSON, a wrong type, an unknown or repeated field, a
// required field missing, a malformed query parameter or header); 422
// invalid when it was read and the domain refuses what it asks (a
// feature, a bucket, a rule, a condition, a segment, a bucket_by, a
// context, a user ID, a document), whatever the route. OFREP's own codes
// keep the statuses the protocol gives them.
var statusOf = map[string]int{
	codeBadRequest:         http.StatusBadRequest,
	codeTooLarge:           http.StatusRequestEntityTooLarge,
	codeForbidden:          http.StatusForbidden,
	codeUnauthorized:       http.StatusUnauthorized,
	codeTooManyPlans:       http.StatusTooManyRequests,
	feature.EInvalid:       http.StatusUnprocessableEntity,
	feature.ENotFound:      http.StatusNotFound,
	feature.EConflict:      http.StatusConflict,
	feature.EChurn:         http.StatusConflict,
	feature.EPrecondition:  http.StatusPreconditionFailed,
	feature.EUnavailable:   http.StatusServiceUnavailable,
	idempotency.EKeyReused: http.StatusUnprocessableEntity,
	idempotency.EKeyInUse:  http.StatusConflict,
	environment.EUnknown:   http.StatusNotFound,
	feature.EInternal:      http.StatusInternalServerError,
	feature.EPrerequisites: http.StatusBadRequest,

	evaluation.OFREPParseError:          http.StatusBadRequest,
	evaluation.OFREPTargetingKeyMissing: http.StatusBadRequest,
	evaluation.OFREPInvalidContext:      http.StatusBadRequest,
	evaluation.OFREPFlagNotFound:        http.StatusNotFound,
}

// errorBody is every error answer: {"error":{"code","message"}}, with the
// field of the body or document the error is about when it is about one
// ("field":"rules[0].conditions[1].value", which the message starts with),
// and the refused change's report for max_churn_exceeded.
type errorBody struct {
	Error struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Field   string          `json:"field,omitempty"`
		Report  *feature.Report `json:"report,omitempty"`
	} `json:"error"`
}

func badRequest(format string, args ...any) error {
	return feature.Errorf(codeBadRequest, format, args...)
}

// ofrepGeneralError is the body of any other error of an OFREP endpoint.
type ofrepGeneralError struct {
	ErrorDetails string `json:"errorDetails"`
}

// isOFREP reports whether the request is for an OFREP endpoint.
func isOFREP(c echo.Context) bool {
	return strings.HasPrefix(c.Request().URL.Path, "/ofrep/")
}

// errorHandler answers every error as JSON with the status of its code.
// Internal errors are logged with the request ID and answered generically.
// OFREP endpoints answer in the protocol's shapes: {"key","errorCode",
// "errorDetails"} for its own errors, {"errorDetails"} for any other.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		if oe, ok := errors.AsType[*evaluation.OFREPError](err); ok {
			_ = c.JSON(statusOf[oe.ErrorCode], oe)
			return
		}
		var body errorBody
		status := http.StatusInternalServerError
		var domain *feature.Error
		var he *echo.HTTPError
		switch {
		case errors.As(err, &domain):
			body.Error.Code, body.Error.Message, body.Error.Field, body.Error.Report = domain.Code, domain.Message, domain.Field, domain.Report
			if s, ok := statusOf[domain.Code]; ok {
				status = s
			}
		case errors.As(err, &he) && he.Code == http.StatusNotFound:
			status = he.Code
			body.Error.Code = feature.ENotFound
			body.Error.Message = "no such endpoint: " + c.Request().Method + " " + c.Request().URL.Path
		case errors.As(err, &he):
			status = he.Code
			body.Error.Code = strings.ReplaceAll(strings.ToLower(http.StatusText(he.Code)), " ", "_")
			body.Error.Message = fmt.Sprint(he.Message)
		default:
			body.Error.Code = feature.EInternal
		}
		if status >= 500 {
			log.Error("request failed", "request_id", c.Response().Header().Get(echo.HeaderXRequestID),
				"method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
			if body.Error.Code == feature.EInternal {
				body.Error.Message = "internal error: the server logged it with request ID " + c.Response().Header().Get(echo.HeaderXRequestID)
			}
		}
		switch {
		case c.Request().Method == http.MethodHead:
			_ = c.NoContent(status)
		case isOFREP(c):
			_ = c.JSON(status, ofrepGeneralError{ErrorDetails: body.Error.Message})
		default:
			_ = c.JSON(status, body)
		}
	}
}

// decode reads the request body as exactly one JSON value into v, refusing
// unknown fields and repeated keys (see jsonscan.RepeatedField), and
// explains what was wrong and where.
func decode(c echo.Context, v any) error {
	body := bufio.NewReader(c.Request().Body)
	if first, err := firstByte(body); err != nil {
		return decodeError(err)
	} else if first != '{' {
		return badRequest("the request body must be a JSON object")
	}
	data, err := io.ReadAll(body) // bounded by the route's body limit
	if err != nil {
		return decodeError(err)
	}
	return decodeBytes(data, v)
}

// decodeBytes is decode of a body already read, which starts with '{':
// exactly one JSON value into v, refusing unknown fields and repeated keys.
func decodeBytes(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("the request body must hold one JSON value and nothing after it")
	}
	if first, again, ok := jsonscan.RepeatedField(data, reflect.TypeOf(v)); ok {
		if first == again {
			return badRequest("key %q appears twice in one object: send each key once", cutKey(first))
		}
		return badRequest("keys %q and %q differ only in case, and name the same field: send it once", cutKey(first), cutKey(again))
	}
	return nil
}

// decodeOptional is decode for requests whose body may be absent, such as
// a DELETE's: an empty body leaves v as it is.
func decodeOptional(c echo.Context, v any) error {
	r := c.Request()
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	body := bufio.NewReader(r.Body)
	if _, err := firstByte(body); errors.Is(err, io.EOF) {
		return nil
	}
	r.Body = io.NopCloser(body)
	return decode(c, v)
}

// firstByte peeks at the first byte of r that is not JSON white space.
func firstByte(r *bufio.Reader) (byte, error) {
	for {
		b, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return b, r.UnreadByte()
	}
}

func decodeError(err error) error {
	var (
		syntax    *json.SyntaxError
		typ       *json.UnmarshalTypeError
		tooLarge  *http.MaxBytesError
		invalidUT *json.InvalidUnmarshalError
	)
	switch {
	case errors.Is(err, io.EOF):
		return badRequest("the request body is empty: send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("the request body ends in the middle of its JSON")
	case errors.As(err, &tooLarge):
		return feature.Errorf(codeTooLarge, "the request body is larger than %d bytes", tooLarge.Limit)
	case errors.As(err, &syntax):
		return badRequest("malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return badRequest("the request body must be a JSON %s, not %s", jsonKind(typ.Type.Kind().String()), typ.Value)
		}
		return badRequest("field %q must be %s, not %s", field, jsonKind(typ.Type.String()), typ.Value)
	case errors.As(err, &invalidUT):
		return err
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if name, err := strconv.Unquote(field); err == nil {
			return badRequest("unknown field %q: check the field's name", cutKey(name))
		}
		return badRequest("unknown field %s: check the field's name", cutKey(field))
	}
	return badRequest("invalid JSON: %v", err)
}

// maxKeyInMessage is how many bytes of a key an error message quotes.
const maxKeyInMessage = 64

// cutKey returns key cut to maxKeyInMessage bytes, with an ellipsis.
func cutKey(key string) string {
	if len(key) <= maxKeyInMessage {
		return key
	}
	return strings.ToValidUTF8(key[:maxKeyInMessage], "") + "…"
}

// jsonKind names a Go type the way a JSON user knows it.
func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "*"):
		return jsonKind(goType[1:])
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "map"), goType == "struct":
		return "an object"
	case strings.HasPrefix(goType, "[]"), goType == "slice":
		return "an array"
	}
	return "an object"
}
