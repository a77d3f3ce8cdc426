package openfeaturesuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/open-feature/go-sdk/openfeature"
)

// Scenario is the state of one scenario. Its steps run one at a time, in
// order; it is not safe for concurrent use.
type Scenario struct {
	// Client evaluates the flags. A step may replace it (a stale
	// provider's) before the first evaluation.
	Client *openfeature.Client

	typ, key, def string         // the flag of "a <type>-flag with key …"
	attrs         map[string]any // the evaluation context's attributes
	res           result
	hooks         []openfeature.Hook
	calls         []string
	asyncDone     chan result
}

// result is one evaluation's outcome, whatever its type.
type result struct {
	value any
	d     openfeature.EvaluationDetails
	err   error
}

// Step is a step definition: a step whose text matches Pattern, a regular
// expression of the whole text (no ^ or $), runs Run with the pattern's
// submatches and, when Table is set, the step's data table (header first).
type Step struct {
	Pattern string
	Table   bool
	Run     func(args []string, table [][]string) error
}

// ParseValue reads text as a value of the type (Boolean, String, Integer,
// Float, Object; any case); an object is JSON whose quotes may be escaped
// as \", or null.
func ParseValue(typ, text string) (any, error) {
	switch strings.ToLower(typ) {
	case "boolean":
		return strconv.ParseBool(text)
	case "string":
		return text, nil
	case "integer":
		return strconv.ParseInt(text, 10, 64)
	case "float":
		return strconv.ParseFloat(text, 64)
	case "object":
		if text == "null" {
			return nil, nil
		}
		var v any
		err := json.Unmarshal([]byte(strings.ReplaceAll(text, `\"`, `"`)), &v)
		return v, err
	}
	return nil, fmt.Errorf("no type %q", typ)
}

// evaluate evaluates the flag key of the type with the default (as text)
// and the attributes, without a targeting key.
func (s *Scenario) evaluate(typ, key, def string, attrs map[string]any, opts ...openfeature.Option) result {
	dv, err := ParseValue(typ, def)
	if err != nil {
		return result{err: fmt.Errorf("default %q: %w", def, err)}
	}
	ctx, ec, of := context.Background(), openfeature.NewTargetlessEvaluationContext(attrs), s.Client
	switch strings.ToLower(typ) {
	case "boolean":
		d, err := of.BooleanValueDetails(ctx, key, dv.(bool), ec, opts...)
		return result{d.Value, d.EvaluationDetails, err}
	case "string":
		d, err := of.StringValueDetails(ctx, key, dv.(string), ec, opts...)
		return result{d.Value, d.EvaluationDetails, err}
	case "integer":
		d, err := of.IntValueDetails(ctx, key, dv.(int64), ec, opts...)
		return result{d.Value, d.EvaluationDetails, err}
	case "float":
		d, err := of.FloatValueDetails(ctx, key, dv.(float64), ec, opts...)
		return result{d.Value, d.EvaluationDetails, err}
	default:
		d, err := of.ObjectValueDetails(ctx, key, dv, ec, opts...)
		return result{d.Value, d.EvaluationDetails, err}
	}
}

// eval evaluates the flag and keeps it and the outcome.
func (s *Scenario) eval(typ, key, def string, attrs map[string]any, opts ...openfeature.Option) {
	s.typ, s.key, s.def = typ, key, def
	s.res = s.evaluate(typ, key, def, attrs, opts...)
}

// checkValue compares the result's value with want, read as typ.
func (s *Scenario) checkValue(typ, want string) error {
	v, err := ParseValue(typ, want)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(s.res.value, v) {
		return fmt.Errorf("value %#v, want %#v (details %+v, error %v)", s.res.value, v, s.res.d, s.res.err)
	}
	return nil
}

func (s *Scenario) checkReason(want string) error {
	if got := string(s.res.d.Reason); got != want {
		return fmt.Errorf("reason %s, want %s (details %+v)", got, want, s.res.d)
	}
	return nil
}

func (s *Scenario) checkVariant(want string) error {
	if s.res.d.Variant != want {
		return fmt.Errorf("variant %q, want %q", s.res.d.Variant, want)
	}
	return nil
}

func (s *Scenario) checkCode(want string) error {
	if got := string(s.res.d.ErrorCode); got != want {
		return fmt.Errorf("error code %q, want %q (details %+v)", got, want, s.res.d)
	}
	return nil
}

// fields checks the three fields of the object the result holds: a holds
// their names, then their values (a boolean, a string and a number).
func (s *Scenario) fields(a []string) error {
	m, ok := s.res.value.(map[string]any)
	if !ok {
		return fmt.Errorf("value %#v is not an object", s.res.value)
	}
	n, _ := strconv.ParseFloat(a[5], 64)
	for k, v := range map[string]any{a[0]: a[3] == "true", a[1]: a[4], a[2]: n} {
		if !reflect.DeepEqual(m[k], v) {
			return fmt.Errorf("field %s = %#v, want %#v", k, m[k], v)
		}
	}
	return nil
}

func (s *Scenario) setAttr(key string, v any) {
	if s.attrs == nil {
		s.attrs = map[string]any{}
	}
	s.attrs[key] = v
}

// recorder is a hook that records its calls.
type recorder struct {
	openfeature.UnimplementedHook
	name string
	s    *Scenario
}

func (r recorder) Before(context.Context, openfeature.HookContext, openfeature.HookHints) (*openfeature.EvaluationContext, error) {
	r.s.calls = append(r.s.calls, r.name+".before")
	return nil, nil
}

func (r recorder) After(context.Context, openfeature.HookContext, openfeature.InterfaceEvaluationDetails, openfeature.HookHints) error {
	r.s.calls = append(r.s.calls, r.name+".after")
	return nil
}

func (r recorder) Finally(context.Context, openfeature.HookContext, openfeature.InterfaceEvaluationDetails, openfeature.HookHints) {
	r.s.calls = append(r.s.calls, r.name+".finally")
}

// modifiable is the evaluation context of the immutability scenario.
func modifiable() map[string]any {
	return map[string]any{"email": "someone@example.com", "plan": "pro", "tags": []any{"a", "b"}, "limits": map[string]any{"seats": 5.0}}
}

// State is the step that checks the provider's state is want.
func (s *Scenario) State(want openfeature.State) error {
	if got := s.Client.State(); got != want {
		return fmt.Errorf("provider state %s, want %s", got, want)
	}
	return nil
}

// Steps returns the definitions of the steps of evaluation.feature and
// evaluation_v2.feature that do not depend on the provider: all but those
// that make a provider (stale, not ready, fatal, error).
func (s *Scenario) Steps() []Step {
	var out []Step
	step := func(pattern string, run func(a []string) error) {
		out = append(out, Step{Pattern: pattern, Run: func(a []string, _ [][]string) error { return run(a) }})
	}
	// Providers.
	step(`a stable provider`, func([]string) error { return s.State(openfeature.ReadyState) })
	step(`the provider status should be "([^"]*)"`, func(a []string) error { return s.State(openfeature.State(a[0])) })

	// evaluation.feature.
	step(`an? (boolean|string|integer|float) flag with key "([^"]*)" is evaluated with (?:details and )?default value "?([^"]*?)"?`, func(a []string) error {
		s.eval(a[0], a[1], a[2], nil)
		return nil
	})
	step(`an object flag with key "([^"]*)" is evaluated with (?:details and )?a null default value`, func(a []string) error {
		s.eval("object", a[0], "null", nil)
		return nil
	})
	step(`the resolved (boolean|string|integer|float) value should be "?([^"]*?)"?`, func(a []string) error {
		return s.checkValue(a[0], a[1])
	})
	step(`the resolved object (?:details )?value should be contain fields "([^"]*)", "([^"]*)", and "([^"]*)", with values "([^"]*)", "([^"]*)" and (\d+), respectively`, s.fields)
	step(`the resolved (boolean|string|integer|float) details value should be "?([^"]*?)"?, the variant should be "([^"]*)", and the reason should be "([^"]*)"`, func(a []string) error {
		return errors.Join(s.checkValue(a[0], a[1]), s.checkVariant(a[2]), s.checkReason(a[3]))
	})
	step(`the variant should be "([^"]*)", and the reason should be "([^"]*)"`, func(a []string) error {
		return errors.Join(s.checkVariant(a[0]), s.checkReason(a[1]))
	})
	step(`context contains keys "([^"]*)", "([^"]*)", "([^"]*)", "([^"]*)" with values "([^"]*)", "([^"]*)", (\d+), "([^"]*)"`, func(a []string) error {
		n, err := strconv.ParseInt(a[6], 10, 64)
		s.attrs = map[string]any{a[0]: a[4], a[1]: a[5], a[2]: n, a[3]: a[7] == "true"}
		return err
	})
	step(`a flag with key "([^"]*)" is evaluated with default value "([^"]*)"`, func(a []string) error {
		s.eval("string", a[0], a[1], s.attrs)
		return nil
	})
	step(`the resolved string response should be "([^"]*)"`, func(a []string) error { return s.checkValue("string", a[0]) })
	step(`the resolved flag value is "([^"]*)" when the context is empty`, func(a []string) error {
		s.eval(s.typ, s.key, s.def, nil)
		return s.checkValue("string", a[0])
	})
	step(`a non-existent string flag with key "([^"]*)" is evaluated with details and a default value "([^"]*)"`, func(a []string) error {
		s.eval("string", a[0], a[1], nil)
		return nil
	})
	step(`a string flag with key "([^"]*)" is evaluated as an integer, with details and a default value (\d+)`, func(a []string) error {
		s.eval("integer", a[0], a[1], nil)
		return nil
	})
	step(`the default (string|integer) value should be returned`, func(a []string) error { return s.checkValue(a[0], s.def) })
	step(`the reason should indicate an error and the error code should indicate a (?:missing flag|type mismatch) with "([^"]*)"`, func(a []string) error {
		return errors.Join(s.checkReason("ERROR"), s.checkCode(a[0]))
	})

	// evaluation_v2.feature.
	step(`a (Boolean|String|Integer|Float|Object)-flag with key "([^"]*)" and a default value "(.*)"`, func(a []string) error {
		s.typ, s.key, s.def = a[0], a[1], a[2]
		return nil
	})
	step(`a context containing a key "([^"]*)", with type "([^"]*)" and with value "([^"]*)"`, func(a []string) error {
		v, err := ParseValue(a[1], a[2])
		s.setAttr(a[0], v)
		return err
	})
	step(`a context containing a key "([^"]*)" with null value`, func(a []string) error {
		s.setAttr(a[0], nil)
		return nil
	})
	step(`the flag was evaluated with details`, func([]string) error {
		s.eval(s.typ, s.key, s.def, s.attrs)
		return nil
	})
	step(`the resolved details value should be "(.*)"`, func(a []string) error { return s.checkValue(s.typ, a[0]) })
	step(`the reason should be "([^"]*)"`, func(a []string) error { return s.checkReason(a[0]) })
	step(`the error-code should be "([^"]*)"`, func(a []string) error { return s.checkCode(a[0]) })
	step(`the flag key should be "([^"]*)"`, func(a []string) error {
		if s.res.d.FlagKey != a[0] {
			return fmt.Errorf("flag key %q, want %q", s.res.d.FlagKey, a[0])
		}
		return nil
	})
	step(`the variant should be "([^"]*)"`, func(a []string) error { return s.checkVariant(a[0]) })
	step(`the error message should contain "([^"]*)"`, func(a []string) error {
		if !strings.Contains(s.res.d.ErrorMessage, a[0]) {
			return fmt.Errorf("error message %q does not contain %q", s.res.d.ErrorMessage, a[0])
		}
		return nil
	})
	out = append(out, Step{Pattern: `the resolved metadata should contain`, Table: true, Run: func(_ []string, table [][]string) error {
		var errs []error
		for _, row := range table[1:] {
			want, err := ParseValue(row[1], row[2])
			if err != nil {
				return err
			}
			if got := s.res.d.FlagMetadata[row[0]]; !reflect.DeepEqual(got, want) {
				errs = append(errs, fmt.Errorf("metadata %s = %#v, want %#v", row[0], got, want))
			}
		}
		return errors.Join(errs...)
	}})
	step(`evaluation options containing specific hooks`, func([]string) error {
		s.hooks = []openfeature.Hook{recorder{name: "first", s: s}, recorder{name: "second", s: s}}
		return nil
	})
	step(`the flag was evaluated with details using the evaluation options`, func([]string) error {
		s.eval(s.typ, s.key, s.def, s.attrs, openfeature.WithHooks(s.hooks...))
		return nil
	})
	step(`the specified hooks should execute during evaluation`, func([]string) error {
		for _, name := range []string{"first", "second"} {
			for _, stage := range []string{"before", "after", "finally"} {
				if !slices.Contains(s.calls, name+"."+stage) {
					return fmt.Errorf("hook %s: no %s call (calls %v)", name, stage, s.calls)
				}
			}
		}
		return s.checkValue(s.typ, "true")
	})
	step(`the hook order should be maintained`, func([]string) error {
		// Before in the order given; after and finally in reverse.
		want := []string{"first.before", "second.before", "second.after", "first.after", "second.finally", "first.finally"}
		if !slices.Equal(s.calls, want) {
			return fmt.Errorf("hook calls %v, want %v", s.calls, want)
		}
		return nil
	})
	step(`an evaluation context with modifiable data`, func([]string) error {
		s.attrs = modifiable()
		return nil
	})
	step(`the original evaluation context should remain unmodified`, func([]string) error {
		if !reflect.DeepEqual(s.attrs, modifiable()) {
			return fmt.Errorf("context %v after evaluation, want %v", s.attrs, modifiable())
		}
		return s.checkValue(s.typ, "true")
	})
	step(`the evaluation details should be immutable`, func([]string) error {
		// What the app does to its copy of the details reaches no other
		// evaluation's.
		version := s.res.d.FlagMetadata["version"]
		s.res.d.FlagMetadata["version"] = -1
		s.res.d.Variant = "changed"
		again := s.evaluate(s.typ, s.key, s.def, s.attrs)
		if version == nil || again.d.FlagMetadata["version"] != version || again.d.Variant != "on" {
			return fmt.Errorf("details after the app changed an earlier one's: %+v", again.d)
		}
		return nil
	})
	step(`the flag was evaluated with details asynchronously`, func([]string) error {
		s.asyncDone = make(chan result, 1)
		typ, key, def, attrs := s.typ, s.key, s.def, maps.Clone(s.attrs)
		go func() { s.asyncDone <- s.evaluate(typ, key, def, attrs) }()
		return nil
	})
	step(`the evaluation should complete without blocking`, func([]string) error {
		s.res = <-s.asyncDone // the go test timeout bounds a hang
		if s.res.err != nil {
			return s.res.err
		}
		sync := s.evaluate(s.typ, s.key, s.def, s.attrs)
		if !reflect.DeepEqual(sync.value, s.res.value) || sync.d.Variant != s.res.d.Variant || sync.d.Reason != s.res.d.Reason {
			return fmt.Errorf("asynchronous %+v, synchronous %+v", s.res, sync)
		}
		return nil
	})
	return out
}
