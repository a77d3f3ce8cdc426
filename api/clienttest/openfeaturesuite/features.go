package openfeaturesuite

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/rollout/rollout/rollout/feature"
)

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

func cond(attr, op string, value any) feature.Condition {
	data, _ := json.Marshal(value)
	return feature.Condition{Attribute: attr, Op: op, Value: data}
}

// evaluatorRules translates each contextEvaluator of test-flags.json, an
// expression that picks a variant (the empty string for none: the default),
// to rules.
var evaluatorRules = map[string][]feature.Rule{
	"email == 'ballmer@macrosoft.com' ? 'zero' : ''": {{
		Name:       "ballmer",
		Conditions: []feature.Condition{cond("email", feature.OpEq, "ballmer@macrosoft.com")},
		Serve:      feature.Serve{Bucket: "zero"},
	}},
	// !customer is true in JavaScript for a customer that is absent too;
	// the scenario gives customer false, which is what the rule asks.
	"!customer && email == 'ballmer@macrosoft.com' && age > 10 ? 'internal' : ''": {{
		Name: "internal-staff",
		Conditions: []feature.Condition{
			cond("customer", feature.OpEq, false),
			cond("email", feature.OpEq, "ballmer@macrosoft.com"),
			cond("age", feature.OpGt, 10),
		},
		Serve: feature.Serve{Bucket: "internal"},
	}},
}

// jsonLogicRules translates the flagd test bed's targeting of the shape
// {"if":[{"and":[{"==":[{"var":[name]},value]},…]}, variant, default]} to
// one rule.
func jsonLogicRules(name string, targeting json.RawMessage, def string) ([]feature.Rule, error) {
	var top struct {
		If []json.RawMessage `json:"if"`
	}
	if err := json.Unmarshal(targeting, &top); err != nil || len(top.If) != 3 {
		return nil, fmt.Errorf("targeting of %s is not an if of three: %s", name, targeting)
	}
	var then, otherwise string
	if json.Unmarshal(top.If[1], &then) != nil || json.Unmarshal(top.If[2], &otherwise) != nil || otherwise != def {
		return nil, fmt.Errorf("targeting of %s: the if's branches must be the variant and the default", name)
	}
	var and struct {
		And []map[string][]json.RawMessage `json:"and"`
	}
	if err := json.Unmarshal(top.If[0], &and); err != nil {
		return nil, fmt.Errorf("targeting of %s: %w", name, err)
	}
	rule := feature.Rule{Name: name, Serve: feature.Serve{Bucket: then}}
	for _, c := range and.And {
		eq, ok := c["=="]
		if !ok || len(eq) != 2 || len(c) != 1 {
			return nil, fmt.Errorf("targeting of %s: only == under and", name)
		}
		var v struct {
			Var []string `json:"var"`
		}
		if json.Unmarshal(eq[0], &v) != nil || len(v.Var) != 1 {
			return nil, fmt.Errorf("targeting of %s: == of a var", name)
		}
		rule.Conditions = append(rule.Conditions, feature.Condition{Attribute: v.Var[0], Op: feature.OpEq, Value: eq[1]})
	}
	return []feature.Rule{rule}, nil
}

// testFeature is a flag's variants as buckets, the default with all of the
// ring.
func testFeature(key string, variants map[string]json.RawMessage, def string, enabled bool) feature.Feature {
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

// Features returns the features the scenarios evaluate, read from the
// suite's flag files in dir: test-flags.json's flags, and the flagd test
// bed's context-aware from testing-flags.json. It fails on a file it cannot
// read and on a targeting expression it has no translation of.
func Features(dir string) ([]feature.Feature, error) {
	var spec map[string]specFlag
	var flagd struct {
		Flags map[string]flagdFlag `json:"flags"`
	}
	for file, into := range map[string]any{"test-flags.json": &spec, "testing-flags.json": &flagd} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err == nil {
			err = json.Unmarshal(data, into)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", file, err)
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
			rules, ok := evaluatorRules[fl.ContextEvaluator]
			if !ok {
				return nil, fmt.Errorf("flag %s: no translation of %q", key, fl.ContextEvaluator)
			}
			f.Rules = rules
		}
		out = append(out, f)
	}
	fl := flagd.Flags["context-aware"]
	f := testFeature("context-aware", fl.Variants, fl.DefaultVariant, fl.State == "ENABLED")
	rules, err := jsonLogicRules("context-aware", fl.Targeting, fl.DefaultVariant)
	if err != nil {
		return nil, err
	}
	f.Rules = rules
	return append(out, f), nil
}
