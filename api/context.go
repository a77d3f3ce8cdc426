package api

import (
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
)

// The context of an evaluation: the attributes besides the user ID that a
// feature's rules and bucket_by read (see docs/targeting.md). They are
// read only when a feature to evaluate uses them, kept for the request
// alone, and never logged or stored.

// ctxPrefix starts the query parameters of GET /evaluate that are context
// attributes: ?ctx.plan=pro.
const ctxPrefix = "ctx."

// queryContext returns the attributes of the query's ctx.NAME parameters:
// each a string, or a list of strings when NAME is repeated. A numeric
// operator reads a number from the string ("12" > 10 holds).
func queryContext(c echo.Context) (rollout.Context, error) {
	var ctx rollout.Context
	for k, vs := range c.QueryParams() {
		name, ok := strings.CutPrefix(k, ctxPrefix)
		if !ok {
			continue
		}
		if ctx == nil {
			ctx = rollout.Context{}
		}
		if len(vs) == 1 {
			ctx[name] = vs[0]
		} else {
			ctx[name] = vs
		}
	}
	if err := rollout.ValidateContext(ctx); err != nil {
		return nil, asBadRequest(err)
	}
	return ctx, nil
}

// hasQueryContext reports whether the raw query may hold a ctx. parameter.
func hasQueryContext(raw string) bool {
	return strings.Contains(raw, ctxPrefix) || strings.Contains(raw, "ctx%2") || strings.Contains(raw, "ctx%2E")
}

// ofrepContext reads the attributes of an OFREP request's context, body
// being valid JSON that parseOFREP accepted: every member but targetingKey
// (the user ID) and, for bulk requests, flags. Strings, numbers, booleans
// and lists of strings are kept; other values are left out, as no rule
// can test them.
func ofrepContext(body []byte, bulk bool, key string) (rollout.Context, error) {
	i := skipSpace(body, 0)
	var ctxJSON []byte
	for it := (members{b: body, i: i}); it.next(); {
		if it.keyIs("context") {
			ctxJSON = it.value
		}
	}
	if len(ctxJSON) == 0 || ctxJSON[0] != '{' {
		return nil, nil
	}
	ctx := rollout.Context{}
	str := jsonStrings(ctxJSON)
	for it := (members{b: ctxJSON}); it.next(); {
		if it.keyIs("targetingKey") || bulk && it.keyIs("flags") {
			continue
		}
		if len(ctx) >= rollout.MaxContextAttrs {
			return nil, &ofrepError{Key: key, ErrorCode: ofrepInvalidContext, ErrorDetails: "the context has more than " + strconv.Itoa(rollout.MaxContextAttrs) + " attributes"}
		}
		name := jsonString(it.key)
		switch v := it.value; v[0] {
		case '"':
			if !readableString(v) {
				return nil, &ofrepError{Key: key, ErrorCode: ofrepInvalidContext, ErrorDetails: "context." + name + " is not valid UTF-8"}
			}
			ctx[name] = str(v)
		case 't', 'f':
			ctx[name] = v[0] == 't'
		case '[':
			if list, ok := stringList(v, str); ok {
				ctx[name] = list
			}
		case '{', 'n':
		default:
			if n, err := strconv.ParseFloat(string(v), 64); err == nil {
				ctx[name] = n
			}
		}
	}
	if err := rollout.ValidateContext(ctx); err != nil {
		return nil, &ofrepError{Key: key, ErrorCode: ofrepInvalidContext, ErrorDetails: rollout.ErrorMessage(err)}
	}
	return ctx, nil
}

// hashContext adds ctx to d, in the order of its sorted names, so that a
// bulk answer's ETag changes with the attributes it depends on.
func hashContext(d interface{ WriteString(string) (int, error) }, ctx rollout.Context) {
	names := make([]string, 0, len(ctx))
	for k := range ctx {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		d.WriteString("\x00ctx\x00")
		d.WriteString(k)
		d.WriteString("\x00")
		switch v := ctx[k].(type) {
		case string:
			d.WriteString("s" + v)
		case bool:
			d.WriteString("b" + strconv.FormatBool(v))
		case float64:
			d.WriteString("n" + strconv.FormatFloat(v, 'g', -1, 64))
		case []string:
			d.WriteString("l")
			for _, s := range v {
				d.WriteString("\x00" + s)
			}
		}
	}
}
