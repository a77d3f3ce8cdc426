package docfile_test

import (
	"strings"
	"testing"

	"github.com/rollout/rollout/internal/docfile"
)

// TestPrerequisitesAsCode: a file's features carry their prerequisites,
// through YAML and back; a list over the limit is refused at its line.
func TestPrerequisitesAsCode(t *testing.T) {
	src := `features:
  - key: new-ui
    fallback: "off"
    buckets: [{name: "off", share: 0}, {name: "on", share: 1}]
    prerequisites:
      - feature: new-api
        buckets: ["on"]
`
	d, err := docfile.Parse("rollouts.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ps := d.Features[0].Prerequisites
	if len(ps) != 1 || ps[0].Feature != "new-api" || len(ps[0].Buckets) != 1 || ps[0].Buckets[0] != "on" {
		t.Fatalf("prerequisites %+v", ps)
	}
	out, err := docfile.Marshal(d, docfile.YAML)
	if err != nil {
		t.Fatal(err)
	}
	back, err := docfile.Parse("back.yaml", out)
	if err != nil || len(back.Features[0].Prerequisites) != 1 {
		t.Fatalf("round trip: %v, %s", err, out)
	}
	var many strings.Builder
	many.WriteString("features:\n  - key: f\n    buckets: [{name: a, replicas: 1}]\n    prerequisites:\n")
	for range 11 {
		many.WriteString("      - {feature: g, buckets: [a]}\n")
	}
	if _, err := docfile.Parse("many.yaml", []byte(many.String())); err == nil || !strings.Contains(err.Error(), "more than 10") {
		t.Errorf("11 prerequisites: %v", err)
	}
}
