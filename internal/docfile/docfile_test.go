package docfile_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rollout/rollout/internal/docfile"
	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
)

const good = `features:
  - key: checkout
    description: New checkout
    enabled: true            # fallback: control (optional)
    buckets:
      - {name: control, share: 0.5}
      - {name: treatment, share: 0.5, value: {"layout": "v2", "n": 1e3}}
    overrides: {"vip@example.com": treatment}
    rules: []
    tags: [payments]
    owner: team-checkout
  - key: banner
    enabled: false
    fallback: "off"
    buckets:
      - name: "off"
        replicas: 100
        value: false
      - name: "on"
        replicas: 0
        value:
          text: Hello
segments: []
`

func TestParse(t *testing.T) {
	d, err := docfile.Parse("rollout.yaml", []byte(good))
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	half, yes, no, hundred, zero := 0.5, true, false, 100, 0
	want := document.Document{
		Features: []document.Feature{{
			Key: "checkout", Description: "New checkout", Enabled: &yes,
			Buckets: []document.Bucket{
				{Name: "control", Share: &half},
				{Name: "treatment", Share: &half, Value: json.RawMessage(`{"layout":"v2","n":1e3}`)},
			},
			Overrides: map[string]string{"vip@example.com": "treatment"}, Rules: []feature.Rule{},
			Tags: []string{"payments"}, Owner: "team-checkout",
		}, {
			Key: "banner", Enabled: &no, Fallback: "off",
			Buckets: []document.Bucket{
				{Name: "off", Replicas: &hundred, Value: json.RawMessage(`false`)},
				{Name: "on", Replicas: &zero, Value: json.RawMessage(`{"text":"Hello"}`)},
			},
		}},
		Segments: []document.Segment{},
	}
	if diff := cmp.Diff(want, d, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
	}
	// The same document as JSON reads the same.
	j, err := docfile.Marshal(d, docfile.JSON)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := docfile.Parse("rollout.json", j)
	if err != nil {
		t.Fatalf("Parse(JSON) = %v\n%s", err, j)
	}
	if diff := cmp.Diff(d, fromJSON, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Parse(Marshal(JSON)) mismatch (-want +got):\n%s", diff)
	}
	y, err := docfile.Marshal(d, docfile.YAML)
	if err != nil {
		t.Fatal(err)
	}
	fromYAML, err := docfile.Parse("rollout.yaml", y)
	if err != nil {
		t.Fatalf("Parse(YAML) = %v\n%s", err, y)
	}
	if diff := cmp.Diff(d, fromYAML, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Parse(Marshal(YAML)) mismatch (-want +got):\n%s\n%s", diff, y)
	}
}

// TestParseErrors: every malformed file is an error that says its line.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		line       int
		want       string
	}{
		{"unknown field", "features:\n  - key: a\n    colour: red\n    buckets: [{name: A, share: 1}]\n", 3, `unknown field "colour"`},
		{"duplicate key", "features:\n  - key: a\n    key: b\n    buckets: [{name: A, share: 1}]\n", 3, `"key" already defined`},
		{"wrong type", "features:\n  - key: a\n    enabled: maybe\n    buckets: [{name: A, share: 1}]\n", 3, `wrong type: a string ("maybe") where true or false is expected`},
		{"share not a number", "features:\n  - key: a\n    buckets:\n      - {name: A, share: half}\n", 4, `wrong type: a string ("half") where a number is expected`},
		{"shares not 100 %", "features:\n  - key: a\n    buckets:\n      - {name: A, share: 0.5}\n      - {name: B, share: 0.4}\n", 4, "sum to 90 %, not 100 %"},
		{"share out of range", "features:\n  - key: a\n    buckets:\n      - {name: A, share: 1.5}\n", 4, "share 1.5 is out of range"},
		{"share and replicas", "features:\n  - key: a\n    buckets:\n      - {name: A, share: 1, replicas: 3}\n", 4, "both share and replicas"},
		{"mixed", "features:\n  - key: a\n    buckets:\n      - {name: A, share: 1}\n      - {name: B, replicas: 3}\n", 4, "mixes shares and replicas"},
		{"bad key", "features:\n  - key: a\n    buckets: [{name: A, share: 1}]\n  - key: Bad Key\n    buckets: [{name: A, share: 1}]\n", 4, `feature key "Bad Key" is invalid`},
		{"listed twice", "features:\n  - key: a\n    buckets: [{name: A, share: 1}]\n  - key: a\n    buckets: [{name: A, share: 1}]\n", 4, `listed twice`},
		{"override of no bucket", "features:\n  - key: a\n    buckets: [{name: A, share: 1}]\n    overrides:\n      bob: B\n", 5, `names bucket "B"`},
		{"override of a quoted user", "features:\n  - key: a\n    buckets: [{name: A, share: 1}]\n    overrides:\n      bob: A\n      \"ann.o'neil\": B\n", 6, `features[0].overrides["ann.o'neil"]: override for user "ann.o'neil" names bucket "B"`},
		{"no buckets", "features:\n  - key: a\n    description: x\n", 2, "needs at least one bucket"},
		{"segment unknown op", "features: []\nsegments:\n  - key: beta\n    conditions:\n      - {attribute: plan, op: eq, value: pro}\n      - {attribute: plan, op: equals, value: pro}\n", 6, `unknown operator "equals"`},
		{"segment in_segment", "features: []\nsegments:\n  - key: beta\n    conditions:\n      - {op: in_segment, value: other}\n", 5, "in_segment"},
		{"segment bad key", "features: []\nsegments:\n  - key: Beta\n", 3, `segment key "Beta" is invalid`},
		{"segment twice", "features: []\nsegments:\n  - key: beta\n  - key: beta\n", 4, "listed twice"},
		{"rule bad regexp", "features:\n  - key: a\n    buckets: [{name: A, share: 1}]\n    rules:\n      - name: r\n        conditions:\n          - {attribute: email, op: matches, value: \"([a-z\"}\n        serve: {bucket: A}\n", 7, "rule \"r\""},
		{"rule serves no bucket", "features:\n  - key: a\n    buckets: [{name: A, share: 1}]\n    rules:\n      - name: r\n        serve: {bucket: B}\n", 6, `serves bucket "B"`},
		{"rule twice", "features:\n  - key: a\n    buckets: [{name: A, share: 1}]\n    rules:\n      - name: r\n        serve: {bucket: A}\n      - name: r\n        serve: {ring: true}\n", 7, "appears twice"},
		{"bad bucket_by", "features:\n  - key: a\n    buckets: [{name: A, share: 1}]\n    bucket_by: \"no spaces\"\n", 4, "bucket_by"},
		{"syntax", "features:\n  - key: a\n   buckets: [\n", 3, ""},
		{"alias", "features:\n  - key: a\n    buckets: [{name: A, share: 1, value: &v [1, 2]}]\n", 3, "anchors (&) and aliases (*) are not taken"},
		{"tag", "features:\n  - key: a\n    buckets: [{name: A, share: 1, value: !!binary aGk=}]\n", 3, "tags (!) are not taken"},
		{"flow nesting", "features:\n  - key: a\n    buckets: [{name: A, share: 1, value: " + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + "}]\n", 3, "collections nest more than 80 deep"},
		{"block nesting", "features:\n  - key: a\n    buckets: [{name: A, share: 1}]\n    value:\n      " + strings.Repeat("- ", 1000) + "x\n", 5, "blocks nest too deep"},
		{"JSON unknown field", "{\n  \"features\": [\n    {\"key\": \"a\", \"buckets\": [{\"name\": \"A\", \"share\": 1}], \"x\": 1}\n  ]\n}\n", 3, `unknown field "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := docfile.Parse("f.yaml", []byte(tc.file))
			var fe *docfile.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Parse() = %v, want a *docfile.Error", err)
			}
			if fe.Line != tc.line || !strings.Contains(fe.Message, tc.want) {
				t.Errorf("Parse() = line %d, %q; want line %d, a message with %q\n%v", fe.Line, fe.Message, tc.line, tc.want, err)
			}
			if !strings.HasPrefix(err.Error(), "f.yaml:") {
				t.Errorf("Parse() = %q, want it to start with the file's name", err)
			}
		})
	}
}

// TestParseValues: a value written in YAML is the JSON it means, its
// mappings in their order; a number as JSON writes it is a number.
func TestParseValues(t *testing.T) {
	d, err := docfile.Parse("f.yaml", []byte("features:\n  - key: a\n    buckets:\n      - name: A\n        share: 1\n        value:\n          z: 1e3\n          a: [x, \"1e3\", true, null, 2.50]\n          m:\n            k: |\n              line\n"))
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	if got, want := string(d.Features[0].Buckets[0].Value), `{"z":1e3,"a":["x","1e3",true,null,2.50],"m":{"k":"line\n"}}`; got != want {
		t.Errorf("value = %s, want %s", got, want)
	}
}

func TestParseTooLarge(t *testing.T) {
	data := bytes.Repeat([]byte("# padding\n"), 1<<20) // 10 MB
	_, err := docfile.Parse("big.yaml", data)
	if err == nil || !strings.Contains(err.Error(), "more than a document may have") {
		t.Errorf("Parse(10 MB) = %v, want an error on its size", err)
	}
}

// TestParseAnyOfAndCase: rules' any-of conditions, ignore_case and splits
// read from YAML, and survive Marshal to YAML and JSON and back.
func TestParseAnyOfAndCase(t *testing.T) {
	const doc = `features:
  - key: checkout
    enabled: true
    buckets: [{name: control, share: 0.5}, {name: treatment, share: 0.5}]
    rules:
      - name: enterprise-or-staff
        conditions:
          - any:
              - {attribute: plan, op: eq, value: enterprise}
              - {attribute: email, op: ends_with, value: "@example.com", ignore_case: true}
          - {attribute: country, op: in, value: [DE, AT], ignore_case: true}
        serve: {bucket: treatment}
      - name: pro
        conditions: [{attribute: plan, op: eq, value: pro}]
        serve: {split: {control: 0.9, treatment: 0.1}, bucket_by: org}
segments:
  - key: staff
    conditions: [{any: [{attribute: email, op: ends_with, value: "@example.com", ignore_case: true}]}]
`
	d, err := docfile.Parse("rollout.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	want := []feature.Condition{
		{Any: []feature.Condition{
			{Attribute: "plan", Op: "eq", Value: json.RawMessage(`"enterprise"`)},
			{Attribute: "email", Op: "ends_with", Value: json.RawMessage(`"@example.com"`), IgnoreCase: true},
		}},
		{Attribute: "country", Op: "in", Value: json.RawMessage(`["DE","AT"]`), IgnoreCase: true},
	}
	if diff := cmp.Diff(want, d.Features[0].Rules[0].Conditions); diff != "" {
		t.Errorf("Parse() conditions mismatch (-want +got):\n%s", diff)
	}
	if got := d.Features[0].Rules[1].Serve; got.Split["treatment"] != 0.1 || got.Split["control"] != 0.9 || got.BucketBy != "org" {
		t.Errorf("split rule serves %+v", got)
	}
	if got := d.Segments[0].Conditions[0]; len(got.Any) != 1 || !got.Any[0].IgnoreCase {
		t.Errorf("segment condition = %+v, want an any-of with ignore_case", got)
	}
	for _, format := range []string{docfile.YAML, docfile.JSON} {
		out, err := docfile.Marshal(d, format)
		if err != nil {
			t.Fatal(err)
		}
		back, err := docfile.Parse("rollout."+format, out)
		if err != nil {
			t.Fatalf("Parse(Marshal()) = %v\n%s", err, out)
		}
		if diff := cmp.Diff(d, back, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Parse(Marshal()) mismatch (-want +got):\n%s\n%s", diff, out)
		}
	}
}
