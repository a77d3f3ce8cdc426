package evaluation

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api/internal/jsonscan"
	"github.com/rollout/rollout/rollout/feature"
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
func queryContext(c echo.Context) (feature.Context, error) {
	var ctx feature.Context
	for k, vs := range c.QueryParams() {
		name, ok := strings.CutPrefix(k, ctxPrefix)
		if !ok {
			continue
		}
		if ctx == nil {
			ctx = feature.Context{}
		}
		if len(vs) == 1 {
			ctx[name] = vs[0]
		} else {
			ctx[name] = vs
		}
	}
	if err := feature.ValidateContext(ctx); err != nil {
		return nil, err
	}
	return ctx, nil
}

// hasQueryContext reports whether the raw query may hold a ctx. parameter.
func hasQueryContext(raw string) bool {
	return strings.Contains(raw, ctxPrefix) || strings.Contains(raw, "ctx%2") // %2E or %2e, an escaped dot
}

// ofrepContext reads the attributes of an OFREP request's context,
// ctxJSON, the object parseOFREPBody found in a body it accepted, with the
// reader of its strings, text: every member but targetingKey (the user ID)
// and, for bulk requests, flags (see readContext). The context comes from
// a pool: the caller gives it back (putContext) once evaluated, and keeps
// nothing of it.
func ofrepContext(ctxJSON []byte, text jsonText, bulk bool, key string) (feature.Context, error) {
	skip := []string{"targetingKey", "flags"}
	if !bulk {
		skip = skip[:1]
	}
	ctx, details := readContext(ctxJSON, text, skip)
	if details != "" {
		return nil, &OFREPError{Key: key, ErrorCode: OFREPInvalidContext, ErrorDetails: details}
	}
	return ctx, nil
}

// readContext reads the attributes of ctxJSON, a JSON object that
// json.Valid accepted, with text, the reader of its strings (see jsonText:
// of ctxJSON or of a body holding it), but the members that skip names, as
// feature.ContextFromJSON converts them: strings, numbers, booleans and
// lists of strings are kept; other values hold none (nil), as no rule can
// test them, but count as attributes. It stops reading at the first
// attribute past feature.MaxContextAttrs or feature.MaxContextBytes, and
// refuses what feature.ValidateContext refuses, with its words, and what
// cannot be read (a string that is not UTF-8, a number out of range):
// details says what is wrong (ctx is nil), "" when nothing is. The context
// comes from a pool: the caller gives it back (putContext) once
// evaluated, and keeps nothing of it.
func readContext(ctxJSON []byte, text jsonText, skip []string) (ctx feature.Context, details string) {
	ctx = getContext()
	invalid := func(details string) (feature.Context, string) {
		putContext(ctx)
		return nil, details
	}
	// suspect: a name, string or list that feature.ValidateContext may
	// refuse; without one, and within the bounds of the attributes and
	// their bytes, it has nothing to refuse, and is not asked.
	size, stopped, suspect := 0, false, false
	for it := jsonscan.MembersAt(ctxJSON, 0); it.Next(); {
		if skipped(&it, skip) {
			continue
		}
		name := text.str(it.Key) // a substring of one copy, as the values
		size += len(name)
		suspect = suspect || len(name) > 4*feature.MaxAttributeBytes
		switch v := it.Value; v[0] {
		case '"':
			if !text.readable(v) {
				return invalid("context." + name + " is not valid UTF-8")
			}
			s := text.str(v)
			size += len(s)
			suspect = suspect || len(s) > feature.MaxContextValueLen
			ctx[name] = s
		case 't', 'f':
			ctx[name] = v[0] == 't'
		case '[':
			list, ok := stringList(v, text)
			if !ok {
				ctx[name] = nil
				break
			}
			suspect = suspect || len(list) > feature.MaxContextList
			for _, s := range list {
				size += len(s)
				suspect = suspect || len(s) > feature.MaxContextValueLen
			}
			ctx[name] = list
		case '{', 'n':
			ctx[name] = nil
		default:
			n, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return invalid("context." + name + " is a number out of range")
			}
			ctx[name] = n
		}
		if len(ctx) > feature.MaxContextAttrs || size > feature.MaxContextBytes {
			stopped = true // what is read so far is refused
			break
		}
	}
	if suspect || stopped {
		if err := feature.ValidateContext(ctx); err != nil {
			return invalid(feature.ErrorMessage(err))
		}
	}
	if stopped { // only a key given twice could make it so
		return invalid(feature.ErrorMessage(feature.ContextTooLarge()))
	}
	return ctx, ""
}

// skipped reports whether it's key is one of names.
func skipped(it *jsonscan.Members, names []string) bool {
	for _, name := range names {
		if it.KeyIs(name) {
			return true
		}
	}
	return false
}

// contexts are the maps of OFREP's contexts, reused.
var contexts = sync.Pool{New: func() any { return make(feature.Context, 8) }}

func getContext() feature.Context { return contexts.Get().(feature.Context) }

// putContext gives ctx back to the pool, emptied; a large one is dropped.
func putContext(ctx feature.Context) {
	if ctx == nil || len(ctx) > 16 {
		return
	}
	clear(ctx)
	contexts.Put(ctx)
}

// hashContext adds ctx to d, in the order of its sorted names, so that a
// bulk answer's ETag changes with the attributes it depends on.
func hashContext(d interface{ WriteString(string) (int, error) }, ctx feature.Context) {
	names := make([]string, 0, len(ctx))
	for k, v := range ctx {
		if v != nil { // an attribute without a value, as one left out
			names = append(names, k)
		}
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
