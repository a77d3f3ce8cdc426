package web

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/rollout/rollout/rollout/feature"
)

// Bounds on the user view's question.
const maxAttributesText = 16 << 10 // the attributes field, in bytes

// attributeName is a context attribute's name, as rules name them.
var attributeName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$`)

// userPage is the data of user.html: what one user gets in every feature,
// and why.
type userPage struct {
	frame
	Title      string
	User       string
	Attributes string // as typed: key=value, one a line
	Asked      bool
	Error      string
	Context    feature.Context
	Rows       []userRow
}

// userRow is one feature's answer for the user.
type userRow struct {
	Key, Bucket, Value string
	Served             bool // a bucket is served; false: apps use their default
	Reason             string
	Why                string // the reason in a sentence
	Version            int
}

// user is the user view: every feature evaluated for one user, as apps
// would evaluate it now, without counting among the exposures.
func (h *handler) user(c echo.Context) error {
	p := userPage{Title: "What does a user get?", User: c.QueryParam("user"), Attributes: c.QueryParam("attributes")}
	if p.User == "" && p.Attributes == "" {
		return h.render(c, http.StatusOK, "user", &p)
	}
	p.Asked = true
	ctx, err := parseAttributes(p.Attributes)
	if err == nil {
		err = feature.ValidateUser(p.User)
	}
	if err != nil {
		p.Error = feature.ErrorMessage(err)
		return h.render(c, http.StatusUnprocessableEntity, "user", &p)
	}
	p.Context = ctx
	snap := h.in(c).Snapshot()
	for _, key := range snap.Keys() {
		// PeekContext is the snapshot's evaluation with the context
		// (rules, bucket_by, prerequisites), not counted among the
		// exposures.
		ev, err := snap.PeekContext(key, p.User, ctx)
		if err != nil {
			continue // deleted since the snapshot was taken
		}
		row := userRow{Key: key, Bucket: ev.Bucket, Served: ev.Bucket != "", Reason: ev.Reason, Version: ev.Version,
			Value: abbreviateValue(string(ev.Value))}
		row.Why = why(ev)
		p.Rows = append(p.Rows, row)
	}
	return h.render(c, http.StatusOK, "user", &p)
}

// why says an evaluation's reason in a sentence.
func why(ev feature.Evaluation) string {
	switch ev.Reason {
	case feature.ReasonRing:
		return "Their place on the feature's ring falls in " + ev.Bucket + "."
	case feature.ReasonOverride:
		return "They are pinned to " + ev.Bucket + " by an override."
	case feature.ReasonDisabled:
		if ev.Bucket == "" {
			return "The feature is off and has no fallback: apps use their default."
		}
		return "The feature is off: everyone gets its fallback, " + ev.Bucket + "."
	case feature.ReasonTargetingMatch:
		return "Rule " + ev.Rule + " matches them: it serves " + bucketWords(ev.Bucket) + "."
	case feature.ReasonSplit:
		return "Rule " + ev.Rule + " matches them, and its split places them in " + bucketWords(ev.Bucket) + "."
	case feature.ReasonPrerequisiteFailed:
		return "Prerequisite " + ev.Prerequisite + " does not serve them a required bucket: they get the fallback, " + bucketWords(ev.Bucket) + "."
	case feature.ReasonDefault:
		return "The context lacks the attribute the ring buckets by: " + bucketWords(ev.Bucket) + "."
	}
	if ev.Bucket == "" {
		return "No bucket (" + ev.Reason + ")."
	}
	return "Reason: " + ev.Reason + "."
}

// abbreviateValue keeps a served value short enough for a table cell.
func abbreviateValue(v string) string {
	const most = 60
	if utf8.RuneCountInString(v) <= most {
		return v
	}
	return string([]rune(v)[:most]) + "…"
}

// parseAttributes reads key=value lines (blank lines and lines starting
// with # skipped) into a context: values true and false are booleans,
// numbers are numbers, anything else a string; a key given twice makes a
// list of strings. At most feature.MaxContextAttrs attributes of valid
// names and values of at most feature.MaxContextValueLen bytes.
func parseAttributes(text string) (feature.Context, error) {
	if len(text) > maxAttributesText {
		return nil, feature.Errorf(feature.EInvalid, "the attributes are %d bytes; at most %d", len(text), maxAttributesText)
	}
	ctx := feature.Context{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok:
			return nil, feature.Errorf(feature.EInvalid, "line %d, %q, is not key=value", i+1, abbreviateValue(line))
		case !attributeName.MatchString(k):
			return nil, feature.Errorf(feature.EInvalid, "line %d: attribute %q is invalid: use 1 to %d characters of A-Z, a-z, 0-9, '_', '.', ':', '-', starting with a letter or '_'", i+1, abbreviateValue(k), feature.MaxAttributeBytes)
		case len(v) > feature.MaxContextValueLen || !utf8.ValidString(v):
			return nil, feature.Errorf(feature.EInvalid, "line %d: the value of %s must be valid UTF-8 of at most %d bytes", i+1, k, feature.MaxContextValueLen)
		}
		if prev, ok := ctx[k]; ok {
			var list []string
			switch p := prev.(type) {
			case []string:
				list = p
			default:
				list = []string{attributeText(p)}
			}
			ctx[k] = append(list, v)
			continue
		}
		if len(ctx) >= feature.MaxContextAttrs {
			return nil, feature.Errorf(feature.EInvalid, "at most %d attributes", feature.MaxContextAttrs)
		}
		ctx[k] = attributeValue(v)
	}
	return ctx, nil
}

func attributeValue(v string) any {
	switch v {
	case "true":
		return true
	case "false":
		return false
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && !strings.ContainsAny(v, "xXnN_") {
		return f
	}
	return v
}

func attributeText(v any) string {
	switch v := v.(type) {
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		return v
	}
	return ""
}

// bucketWords is a bucket's name, or "no bucket" (apps use their default).
func bucketWords(b string) string {
	if b == "" {
		return "no bucket (apps use their default)"
	}
	return b
}
