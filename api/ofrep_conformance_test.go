package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cucumber/godog"
	"github.com/open-feature/go-sdk-contrib/providers/ofrep"
	"github.com/open-feature/go-sdk/openfeature"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/feature"
)

// OpenFeature's evaluation features, the ones the in-app provider's
// conformance test runs (api/clienttest/provider/testdata/openfeature, see
// SOURCE.md there), run through OpenFeature's own OFREP provider for Go
// (go-sdk-contrib/providers/ofrep) against a real server on loopback, with
// godog. The flags are the test bed's translated to rollout's features as
// the in-app test translates them: each variant a bucket, the default
// variant with all of the ring, a disabled flag switched off without a
// fallback, each targeting expression a rule. The scenarios evaluate
// without a targeting key, as the suite does.

const openFeatureDir = "clienttest/provider/testdata/openfeature"

// ofrepExpected lists the scenarios that cannot pass through the OFREP
// provider, by the text of the step that shows it, and why. They run, and
// must fail at that step: one that passes, or fails elsewhere, is an error,
// so that the list stays true. skip marks those the in-app test skips too
// (they need a test double of a provider's state).
var ofrepExpected = map[string]struct {
	why      string
	skip     bool
	scenario string // when not "", the only scenario expected to fail at the step
}{
	"a not ready provider": {why: "needs a test double: a provider that stays NOT_READY", skip: true},
	"a fatal provider":     {why: "needs a test double: a provider in FATAL state", skip: true},
	"a error provider":     {why: "needs a test double: a provider in ERROR state", skip: true},
	"a stale provider": {why: "the OFREP provider keeps no state of its own and emits no events: it stays READY " +
		"when its server is gone, and each evaluation fails on its own (GENERAL)"},
	`the reason should be "CACHED"`: {why: "the OFREP provider caches no answers (each evaluation is a request), so no reason CACHED"},
	`the resolved metadata should contain`: {why: "rollout's features carry no flag metadata of their own (string, integer, " +
		"float, boolean entries): OFREP's metadata is the feature's version"},
	`the resolved details value should be "{}"`: {scenario: "Type mismatch error", why: "the OFREP provider " +
		"(v0.1.7) checks no type for an object evaluation: a string flag's \"hi\" is returned as the object's value, not TYPE_MISMATCH"},
	`the error message should contain "flag missing-flag not found"`: {scenario: "Error message in evaluation details",
		why: "on 404 the OFREP provider (v0.1.7) writes a message of its own, \"flag for key 'missing-flag' does not exist\", " +
			"whatever the server's errorDetails say"},
}

// specFlag is a flag of test-flags.json.
type specFlag struct {
	Disabled         bool                       `json:"disabled"`
	Variants         map[string]json.RawMessage `json:"variants"`
	DefaultVariant   *string                    `json:"defaultVariant"`
	ContextEvaluator string                     `json:"contextEvaluator"`
}

// flagdFlag is a flag of the flagd test bed's testing-flags.json.
type flagdFlag struct {
	State          string                     `json:"state"`
	Variants       map[string]json.RawMessage `json:"variants"`
	DefaultVariant string                     `json:"defaultVariant"`
	Targeting      json.RawMessage            `json:"targeting"`
}

func specCond(attr, op string, value any) feature.Condition {
	data, _ := json.Marshal(value)
	return feature.Condition{Attribute: attr, Op: op, Value: data}
}

// specRules translates each contextEvaluator of test-flags.json to rules;
// the in-app test's table says why each is so.
var specRules = map[string][]feature.Rule{
	"email == 'ballmer@macrosoft.com' ? 'zero' : ''": {{Name: "ballmer",
		Conditions: []feature.Condition{specCond("email", feature.OpEq, "ballmer@macrosoft.com")},
		Serve:      feature.Serve{Bucket: "zero"}}},
	"!customer && email == 'ballmer@macrosoft.com' && age > 10 ? 'internal' : ''": {{Name: "internal-staff",
		Conditions: []feature.Condition{specCond("customer", feature.OpEq, false),
			specCond("email", feature.OpEq, "ballmer@macrosoft.com"), specCond("age", feature.OpGt, 10)},
		Serve: feature.Serve{Bucket: "internal"}}},
}

// contextAwareRule translates the flagd test bed's context-aware targeting,
// an if of an and of ==, to one rule.
func contextAwareRule(fl flagdFlag) (feature.Rule, error) {
	var top struct{ If []json.RawMessage }
	if err := json.Unmarshal(fl.Targeting, &top); err != nil || len(top.If) != 3 {
		return feature.Rule{}, fmt.Errorf("targeting %s is not an if of three", fl.Targeting)
	}
	var then string
	var and struct {
		And []map[string][]json.RawMessage
	}
	if err := errors.Join(json.Unmarshal(top.If[1], &then), json.Unmarshal(top.If[0], &and)); err != nil {
		return feature.Rule{}, err
	}
	rule := feature.Rule{Name: "context-aware", Serve: feature.Serve{Bucket: then}}
	for _, c := range and.And {
		var v struct{ Var []string }
		eq := c["=="]
		if len(c) != 1 || len(eq) != 2 || json.Unmarshal(eq[0], &v) != nil || len(v.Var) != 1 {
			return feature.Rule{}, fmt.Errorf("targeting: only == of a var under and")
		}
		rule.Conditions = append(rule.Conditions, feature.Condition{Attribute: v.Var[0], Op: feature.OpEq, Value: eq[1]})
	}
	return rule, nil
}

// openFeatureFlags returns the test bed's flags as features.
func openFeatureFlags(t *testing.T) []feature.Feature {
	t.Helper()
	testFeature := func(key string, variants map[string]json.RawMessage, def string, enabled bool) feature.Feature {
		f := feature.Feature{Key: key, Enabled: enabled, Salt: key}
		for _, name := range slices.Sorted(maps.Keys(variants)) {
			b := feature.Bucket{Name: name, Value: variants[name]}
			if name == def {
				b.Replicas = 100
			}
			f.Buckets = append(f.Buckets, b)
		}
		return f
	}
	var spec map[string]specFlag
	var flagd struct{ Flags map[string]flagdFlag }
	for file, into := range map[string]any{"test-flags.json": &spec, "testing-flags.json": &flagd} {
		data, err := os.ReadFile(filepath.Join(openFeatureDir, file))
		if err == nil {
			err = json.Unmarshal(data, into)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var out []feature.Feature
	for _, key := range slices.Sorted(maps.Keys(spec)) {
		fl := spec[key]
		if fl.DefaultVariant == nil || key == "context-aware" {
			continue // no scenario uses them; context-aware comes from flagd
		}
		f := testFeature(key, fl.Variants, *fl.DefaultVariant, !fl.Disabled)
		if fl.ContextEvaluator != "" {
			rules, ok := specRules[fl.ContextEvaluator]
			if !ok {
				t.Fatalf("flag %s: no translation of %q", key, fl.ContextEvaluator)
			}
			f.Rules = rules
		}
		out = append(out, f)
	}
	fl := flagd.Flags["context-aware"]
	f := testFeature("context-aware", fl.Variants, fl.DefaultVariant, fl.State == "ENABLED")
	rule, err := contextAwareRule(fl)
	if err != nil {
		t.Fatal(err)
	}
	f.Rules = []feature.Rule{rule}
	return append(out, f)
}

// TestOpenFeatureConformanceOverOFREP runs every scenario of
// evaluation.feature and evaluation_v2.feature through the OFREP provider.
func TestOpenFeatureConformanceOverOFREP(t *testing.T) {
	s := newServer(t, "", api.Options{})
	for _, f := range openFeatureFlags(t) {
		s.create(f)
	}
	const domain = "ofrep-conformance"
	if err := openfeature.SetNamedProviderAndWait(domain, ofrep.NewProvider(s.URL)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { openfeature.SetNamedProviderAndWait(domain, openfeature.NoopProvider{}) })
	of := openfeature.NewClient(domain)

	type outcome struct {
		name, failedAt string
		err            error
	}
	var outcomes []outcome
	var out bytes.Buffer
	suite := godog.TestSuite{
		Name: "openfeature-ofrep",
		ScenarioInitializer: func(sc *godog.ScenarioContext) {
			w := &ofrepWorld{t: t, of: of, url: s.URL}
			w.steps(sc)
			var failedAt string
			sc.StepContext().After(func(ctx context.Context, st *godog.Step, status godog.StepResultStatus, err error) (context.Context, error) {
				if failedAt == "" && (err != nil || status == godog.StepUndefined) {
					failedAt = st.Text
				}
				return ctx, nil
			})
			sc.After(func(ctx context.Context, p *godog.Scenario, err error) (context.Context, error) {
				outcomes = append(outcomes, outcome{name: filepath.Base(p.Uri) + " " + p.Name, failedAt: failedAt, err: err})
				return ctx, nil
			})
		},
		Options: &godog.Options{Format: "progress", Output: &out, NoColors: true, Strict: true, Concurrency: 1,
			Paths: []string{filepath.Join(openFeatureDir, "evaluation.feature"), filepath.Join(openFeatureDir, "evaluation_v2.feature")}},
	}
	suite.Run()

	var passed, skipped, cannot int
	for _, o := range outcomes {
		want, expected := ofrepExpected[o.failedAt]
		if want.scenario != "" && !strings.HasSuffix(o.name, " "+want.scenario) {
			expected = false
		}
		switch {
		case o.err == nil && o.failedAt == "":
			passed++
		case expected && want.skip:
			skipped++
			t.Logf("skipped %s: %s", o.name, want.why)
		case expected:
			cannot++
			t.Logf("cannot pass %s: %s (fails at %q as it must: %v)", o.name, want.why, o.failedAt, o.err)
		default:
			t.Errorf("%s: step %q: %v", o.name, o.failedAt, o.err)
		}
	}
	// A scenario listed as one that cannot pass but passing is an error:
	// each listed step must still be where some scenario fails.
	for step, want := range ofrepExpected {
		if !slices.ContainsFunc(outcomes, func(o outcome) bool { return o.failedAt == step }) {
			t.Errorf("no scenario fails at %q, listed as one the OFREP provider cannot pass (%s): take it off the list", step, want.why)
		}
	}
	if len(outcomes) < 40 {
		t.Errorf("%d scenarios ran, want every one of both features", len(outcomes))
	}
	if t.Failed() {
		t.Logf("godog's report:\n%s", out.String())
	}
	t.Logf("OpenFeature conformance over OFREP: %d scenarios, %d passed, %d skipped (test doubles), %d cannot pass",
		len(outcomes), passed, skipped, cannot)
}

// ofrepWorld is the state of one scenario.
type ofrepWorld struct {
	t   *testing.T
	of  *openfeature.Client
	url string

	typ, key, def string
	attrs         map[string]any
	res           ofrepResult
	hooks         []openfeature.Hook
	calls         []string
	asyncDone     chan ofrepResult
}

// ofrepResult is one evaluation's outcome, whatever its type.
type ofrepResult struct {
	value any
	d     openfeature.EvaluationDetails
	err   error
}

// parseFeatureValue reads text as a value of the type (Boolean, String,
// Integer, Float, Object; any case).
func parseFeatureValue(typ, text string) (any, error) {
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
func (w *ofrepWorld) evaluate(of *openfeature.Client, typ, key, def string, attrs map[string]any, opts ...openfeature.Option) ofrepResult {
	dv, err := parseFeatureValue(typ, def)
	if err != nil {
		return ofrepResult{err: fmt.Errorf("default %q: %w", def, err)}
	}
	ctx, ec := context.Background(), openfeature.NewTargetlessEvaluationContext(attrs)
	switch strings.ToLower(typ) {
	case "boolean":
		d, err := of.BooleanValueDetails(ctx, key, dv.(bool), ec, opts...)
		return ofrepResult{d.Value, d.EvaluationDetails, err}
	case "string":
		d, err := of.StringValueDetails(ctx, key, dv.(string), ec, opts...)
		return ofrepResult{d.Value, d.EvaluationDetails, err}
	case "integer":
		d, err := of.IntValueDetails(ctx, key, dv.(int64), ec, opts...)
		return ofrepResult{d.Value, d.EvaluationDetails, err}
	case "float":
		d, err := of.FloatValueDetails(ctx, key, dv.(float64), ec, opts...)
		return ofrepResult{d.Value, d.EvaluationDetails, err}
	default:
		d, err := of.ObjectValueDetails(ctx, key, dv, ec, opts...)
		return ofrepResult{d.Value, d.EvaluationDetails, err}
	}
}

func (w *ofrepWorld) eval(typ, key, def string, attrs map[string]any, opts ...openfeature.Option) {
	w.typ, w.key, w.def = typ, key, def
	w.res = w.evaluate(w.of, typ, key, def, attrs, opts...)
}

func (w *ofrepWorld) checkValue(typ, want string) error {
	v, err := parseFeatureValue(typ, want)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(w.res.value, v) {
		return fmt.Errorf("value %#v, want %#v (details %+v, error %v)", w.res.value, v, w.res.d, w.res.err)
	}
	return nil
}

func (w *ofrepWorld) checkReason(want string) error {
	if got := string(w.res.d.Reason); got != want {
		return fmt.Errorf("reason %s, want %s (details %+v)", got, want, w.res.d)
	}
	return nil
}

func (w *ofrepWorld) checkVariant(want string) error {
	if w.res.d.Variant != want {
		return fmt.Errorf("variant %q, want %q", w.res.d.Variant, want)
	}
	return nil
}

func (w *ofrepWorld) checkCode(want string) error {
	if got := string(w.res.d.ErrorCode); got != want {
		return fmt.Errorf("error code %q, want %q (details %+v)", got, want, w.res.d)
	}
	return nil
}

func (w *ofrepWorld) setAttr(key string, v any) {
	if w.attrs == nil {
		w.attrs = map[string]any{}
	}
	w.attrs[key] = v
}

// ofrepRecorder is a hook that records its calls.
type ofrepRecorder struct {
	openfeature.UnimplementedHook
	name string
	w    *ofrepWorld
}

func (r ofrepRecorder) Before(context.Context, openfeature.HookContext, openfeature.HookHints) (*openfeature.EvaluationContext, error) {
	r.w.calls = append(r.w.calls, r.name+".before")
	return nil, nil
}

func (r ofrepRecorder) After(context.Context, openfeature.HookContext, openfeature.InterfaceEvaluationDetails, openfeature.HookHints) error {
	r.w.calls = append(r.w.calls, r.name+".after")
	return nil
}

func (r ofrepRecorder) Finally(context.Context, openfeature.HookContext, openfeature.InterfaceEvaluationDetails, openfeature.HookHints) {
	r.w.calls = append(r.w.calls, r.name+".finally")
}

func modifiableContext() map[string]any {
	return map[string]any{"email": "someone@example.com", "plan": "pro", "tags": []any{"a", "b"}, "limits": map[string]any{"seats": 5.0}}
}

// steps defines the features' steps for w.
func (w *ofrepWorld) steps(sc *godog.ScenarioContext) {
	step := func(pattern string, fn any) { sc.Step("^"+pattern+"$", fn) }
	state := func(want openfeature.State) error {
		if s := w.of.State(); s != want {
			return fmt.Errorf("provider state %s, want %s", s, want)
		}
		return nil
	}
	// Providers.
	step(`a stable provider`, func() error { return state(openfeature.ReadyState) })
	step(`a stale provider`, func() error {
		// A provider of its own whose server is gone.
		domain := "ofrep-stale-" + w.t.Name()
		if err := openfeature.SetNamedProviderAndWait(domain, ofrep.NewProvider("http://127.0.0.1:1")); err != nil {
			return err
		}
		w.of = openfeature.NewClient(domain)
		return state(openfeature.StaleState)
	})
	for _, name := range []string{"not ready", "fatal", "error"} {
		step(`a `+name+` provider`, func() error { return errors.New("needs a test double of the provider's state") })
	}
	step(`the provider status should be "([^"]*)"`, func(want string) error { return state(openfeature.State(want)) })

	// evaluation.feature.
	step(`an? (boolean|string|integer|float) flag with key "([^"]*)" is evaluated with (?:details and )?default value "?([^"]*?)"?`,
		func(typ, key, def string) { w.eval(typ, key, def, nil) })
	step(`an object flag with key "([^"]*)" is evaluated with (?:details and )?a null default value`,
		func(key string) { w.eval("object", key, "null", nil) })
	step(`the resolved (boolean|string|integer|float) value should be "?([^"]*?)"?`, w.checkValue)
	step(`the resolved object (?:details )?value should be contain fields "([^"]*)", "([^"]*)", and "([^"]*)", with values "([^"]*)", "([^"]*)" and (\d+), respectively`,
		func(b, s, n, bv, sv, nv string) error {
			m, ok := w.res.value.(map[string]any)
			if !ok {
				return fmt.Errorf("value %#v is not an object", w.res.value)
			}
			num, _ := strconv.ParseFloat(nv, 64)
			for k, v := range map[string]any{b: bv == "true", s: sv, n: num} {
				if !reflect.DeepEqual(m[k], v) {
					return fmt.Errorf("field %s = %#v, want %#v", k, m[k], v)
				}
			}
			return nil
		})
	step(`the resolved (boolean|string|integer|float) details value should be "?([^"]*?)"?, the variant should be "([^"]*)", and the reason should be "([^"]*)"`,
		func(typ, value, variant, reason string) error {
			return errors.Join(w.checkValue(typ, value), w.checkVariant(variant), w.checkReason(reason))
		})
	step(`the variant should be "([^"]*)", and the reason should be "([^"]*)"`, func(variant, reason string) error {
		return errors.Join(w.checkVariant(variant), w.checkReason(reason))
	})
	step(`context contains keys "([^"]*)", "([^"]*)", "([^"]*)", "([^"]*)" with values "([^"]*)", "([^"]*)", (\d+), "([^"]*)"`,
		func(k1, k2, k3, k4, v1, v2, v3, v4 string) error {
			n, err := strconv.ParseInt(v3, 10, 64)
			w.attrs = map[string]any{k1: v1, k2: v2, k3: n, k4: v4 == "true"}
			return err
		})
	step(`a flag with key "([^"]*)" is evaluated with default value "([^"]*)"`, func(key, def string) { w.eval("string", key, def, w.attrs) })
	step(`the resolved string response should be "([^"]*)"`, func(want string) error { return w.checkValue("string", want) })
	step(`the resolved flag value is "([^"]*)" when the context is empty`, func(want string) error {
		w.eval(w.typ, w.key, w.def, nil)
		return w.checkValue("string", want)
	})
	step(`a non-existent string flag with key "([^"]*)" is evaluated with details and a default value "([^"]*)"`,
		func(key, def string) { w.eval("string", key, def, nil) })
	step(`a string flag with key "([^"]*)" is evaluated as an integer, with details and a default value (\d+)`,
		func(key, def string) { w.eval("integer", key, def, nil) })
	step(`the default (string|integer) value should be returned`, func(typ string) error { return w.checkValue(typ, w.def) })
	step(`the reason should indicate an error and the error code should indicate a (?:missing flag|type mismatch) with "([^"]*)"`,
		func(code string) error { return errors.Join(w.checkReason("ERROR"), w.checkCode(code)) })

	// evaluation_v2.feature.
	step(`a (Boolean|String|Integer|Float|Object)-flag with key "([^"]*)" and a default value "(.*)"`,
		func(typ, key, def string) { w.typ, w.key, w.def = typ, key, def })
	step(`a context containing a key "([^"]*)", with type "([^"]*)" and with value "([^"]*)"`, func(key, typ, value string) error {
		v, err := parseFeatureValue(typ, value)
		w.setAttr(key, v)
		return err
	})
	step(`a context containing a key "([^"]*)" with null value`, func(key string) { w.setAttr(key, nil) })
	step(`the flag was evaluated with details`, func() { w.eval(w.typ, w.key, w.def, w.attrs) })
	step(`the resolved details value should be "(.*)"`, func(want string) error { return w.checkValue(w.typ, want) })
	step(`the reason should be "([^"]*)"`, w.checkReason)
	step(`the error-code should be "([^"]*)"`, w.checkCode)
	step(`the flag key should be "([^"]*)"`, func(want string) error {
		if w.res.d.FlagKey != want {
			return fmt.Errorf("flag key %q, want %q", w.res.d.FlagKey, want)
		}
		return nil
	})
	step(`the variant should be "([^"]*)"`, w.checkVariant)
	step(`the error message should contain "([^"]*)"`, func(want string) error {
		if !strings.Contains(w.res.d.ErrorMessage, want) {
			return fmt.Errorf("error message %q does not contain %q", w.res.d.ErrorMessage, want)
		}
		return nil
	})
	step(`the resolved metadata should contain`, func(table *godog.Table) error {
		var errs []error
		for _, row := range table.Rows[1:] {
			want, err := parseFeatureValue(row.Cells[1].Value, row.Cells[2].Value)
			if err != nil {
				return err
			}
			if got := w.res.d.FlagMetadata[row.Cells[0].Value]; !reflect.DeepEqual(got, want) {
				errs = append(errs, fmt.Errorf("metadata %s = %#v, want %#v", row.Cells[0].Value, got, want))
			}
		}
		return errors.Join(errs...)
	})
	step(`evaluation options containing specific hooks`, func() {
		w.hooks = []openfeature.Hook{ofrepRecorder{name: "first", w: w}, ofrepRecorder{name: "second", w: w}}
	})
	step(`the flag was evaluated with details using the evaluation options`, func() {
		w.eval(w.typ, w.key, w.def, w.attrs, openfeature.WithHooks(w.hooks...))
	})
	step(`the specified hooks should execute during evaluation`, func() error {
		for _, name := range []string{"first", "second"} {
			for _, stage := range []string{"before", "after", "finally"} {
				if !slices.Contains(w.calls, name+"."+stage) {
					return fmt.Errorf("hook %s: no %s call (calls %v)", name, stage, w.calls)
				}
			}
		}
		return w.checkValue(w.typ, "true")
	})
	step(`the hook order should be maintained`, func() error {
		want := []string{"first.before", "second.before", "second.after", "first.after", "second.finally", "first.finally"}
		if !slices.Equal(w.calls, want) {
			return fmt.Errorf("hook calls %v, want %v", w.calls, want)
		}
		return nil
	})
	step(`an evaluation context with modifiable data`, func() { w.attrs = modifiableContext() })
	step(`the original evaluation context should remain unmodified`, func() error {
		if !reflect.DeepEqual(w.attrs, modifiableContext()) {
			return fmt.Errorf("context %v after evaluation, want %v", w.attrs, modifiableContext())
		}
		return w.checkValue(w.typ, "true")
	})
	step(`the evaluation details should be immutable`, func() error {
		version := w.res.d.FlagMetadata["version"]
		w.res.d.FlagMetadata["version"] = -1
		w.res.d.Variant = "changed"
		again := w.evaluate(w.of, w.typ, w.key, w.def, w.attrs)
		if version == nil || again.d.FlagMetadata["version"] != version || again.d.Variant != "on" {
			return fmt.Errorf("details after the app changed an earlier one's: %+v", again.d)
		}
		return nil
	})
	step(`the flag was evaluated with details asynchronously`, func() {
		w.asyncDone = make(chan ofrepResult, 1)
		typ, key, def, attrs := w.typ, w.key, w.def, maps.Clone(w.attrs)
		go func() { w.asyncDone <- w.evaluate(w.of, typ, key, def, attrs) }()
	})
	step(`the evaluation should complete without blocking`, func() error {
		w.res = <-w.asyncDone // the go test timeout bounds a hang
		if w.res.err != nil {
			return w.res.err
		}
		sync := w.evaluate(w.of, w.typ, w.key, w.def, w.attrs)
		if !reflect.DeepEqual(sync.value, w.res.value) || sync.d.Variant != w.res.d.Variant || sync.d.Reason != w.res.d.Reason {
			return fmt.Errorf("asynchronous %+v, synchronous %+v", w.res, sync)
		}
		return nil
	})
}
