package docfile_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/internal/docfile"
	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
)

// allocated returns the bytes f allocates, and the time it takes.
func allocated(f func()) (uint64, time.Duration) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, took
}

// hostileDocuments are request bodies of a megabyte that cost the YAML
// parser far more than their size, or hold far more than a document takes.
func hostileDocuments() map[string]string {
	var dense, block strings.Builder
	dense.WriteString("features:\n")
	for i := 0; dense.Len() < 1<<20-32; i++ {
		fmt.Fprintf(&dense, "- {key: f%d}\n", i)
	}
	block.WriteString("features:\n")
	for i := 0; block.Len() < 1<<20-32; i++ {
		fmt.Fprintf(&block, "- key: feature-%07d\n", i)
	}
	var longLine strings.Builder
	longLine.WriteString("features: [")
	longLine.WriteString(strings.Repeat("aaaa,", 150_000))
	longLine.WriteString("]]]")
	return map[string]string{
		"brackets":       "features: [" + strings.Repeat("]", 1_040_000),
		"dense features": dense.String(),
		"block features": block.String(),
		"long line":      longLine.String(),
		"empty mappings": "features: [{key: a, buckets: [" + strings.Repeat("{},", 100_000) + "]}]",
	}
}

// TestHostileDocuments: each hostile document is refused, with its line,
// an excerpt of its source a few lines long, and allocations bounded by a
// small multiple of its size (the parser's errors once took the square of
// a line, and every feature was decoded before their count was checked).
func TestHostileDocuments(t *testing.T) {
	for name, doc := range hostileDocuments() {
		t.Run(name, func(t *testing.T) {
			var err error
			bytes, took := allocated(func() {
				var f docfile.File
				err = docfile.Unmarshal("body.yaml", []byte(doc), &f)
			})
			t.Logf("%d bytes: refused in %v, %d MB allocated", len(doc), took, bytes>>20)
			var fe *docfile.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Unmarshal() = %v, want a *docfile.Error", err)
			}
			if len(fe.Error()) > 2048 {
				t.Errorf("len(Error()) = %d, want at most 2048: %.300s…", len(fe.Error()), fe.Error())
			}
			if limit := uint64(200 * len(doc)); bytes > limit {
				t.Errorf("Unmarshal() allocated %d MB, want at most %d MB (200 times the document)", bytes>>20, limit>>20)
			}
			t.Logf("%.400s", fe.Error())
		})
	}
}

// TestTooMany: a list longer than a document takes is refused at its
// entry past the limit, naming its place.
func TestTooMany(t *testing.T) {
	var overrides strings.Builder
	for i := range feature.MaxOverrides + 1 {
		fmt.Fprintf(&overrides, "      u%d: A\n", i)
	}
	tests := []struct {
		name, doc string
		line      int
		want      string
	}{
		{"features", "features:\n" + strings.Repeat("- key: a\n", document.MaxFeatures+1), document.MaxFeatures + 2, "features has more than 1000 entries"},
		{"buckets", "features:\n- key: a\n  buckets: [" + strings.Repeat("{name: A, share: 0},", feature.MaxBuckets+1) + "]\n", 3, "features[0].buckets has more than 100 entries"},
		{"overrides", "features:\n  - key: a\n    overrides:\n" + overrides.String(), feature.MaxOverrides + 4, "features[0].overrides has more than 10000 entries"},
		{"conditions", "features:\n- key: a\n  rules:\n  - name: r\n    conditions: [" + strings.Repeat("{},", feature.MaxConditions+1) + "]\n", 5, "features[0].rules[0].conditions has more than 20 entries"},
		{"segments", "segments: [" + strings.Repeat("{},", feature.MaxSegments+1) + "]\n", 1, "segments has more than 1000 entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f docfile.File
			err := docfile.Unmarshal("f.yaml", []byte(tt.doc), &f)
			var fe *docfile.Error
			if !errors.As(err, &fe) || fe.Line != tt.line || !strings.Contains(fe.Message, tt.want) {
				t.Fatalf("Unmarshal() = %v, want line %d, a message with %q", err, tt.line, tt.want)
			}
		})
	}
}

// TestStrict: what a JSON document would refuse, a YAML one refuses too.
func TestStrict(t *testing.T) {
	longKey := strings.Repeat("k", 100_000)
	tests := []struct {
		name, doc string
		line      int
		want      string
	}{
		{"replicas with a fraction", "features:\n- key: a\n  buckets: [{name: A, replicas: 1.5}]\n", 3, "wrong type: 1.5, with a fraction, where a whole number is expected"},
		{"quoted share", "features:\n- key: a\n  buckets: [{name: A, share: \"1\"}]\n", 3, `wrong type: a quoted string ("1") where a number is expected`},
		{"quoted replicas", "features:\n- key: a\n  buckets: [{name: A, replicas: '10'}]\n", 3, `wrong type: a quoted string ("10") where a whole number is expected`},
		{"quoted enabled", "features:\n- key: a\n  enabled: \"true\"\n  buckets: [{name: A, share: 1}]\n", 3, `wrong type: a quoted string ("true") where true or false is expected`},
		{"quoted tolerance", "features:\n- key: a\n  tolerance: \"0.1\"\n", 3, "where a number is expected"},
		{"second document", "features: []\n---\nfeatures:\n- key: a\n  buckets: [{name: A, share: 1}]\n", 3, "a second document (after ---) is not taken"},
		{"long unknown key", "features:\n- key: a\n  " + longKey + ": 1\n", 3, `unknown field "` + longKey[:64] + `…"`},
		{"long duplicate key", "features:\n- key: a\n  overrides: {" + longKey + ": A, " + longKey + ": A}\n", 3, `mapping key "` + longKey[:64] + `…" already defined`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f docfile.File
			err := docfile.Unmarshal("f.yaml", []byte(tt.doc), &f)
			var fe *docfile.Error
			if !errors.As(err, &fe) || fe.Line != tt.line || !strings.Contains(fe.Message, tt.want) {
				t.Fatalf("Unmarshal() = %.300v, want line %d, a message with %q", err, tt.line, tt.want)
			}
			if len(fe.Message) > 300 {
				t.Errorf("len(Message) = %d, want at most 300", len(fe.Message))
			}
		})
	}
	// What the strictness must still take.
	for name, doc := range map[string]string{
		"a leading ---":      "---\nfeatures:\n- key: a\n  buckets: [{name: A, share: 1}]\n",
		"a closing ...":      "features:\n- key: a\n  buckets: [{name: A, share: 1}]\n...\n",
		"a plain number 1e0": "features:\n- key: a\n  buckets: [{name: A, share: 1e0}]\n",
		"whole replicas":     "features:\n- key: a\n  buckets: [{name: A, replicas: 100}]\n",
		"an integer share":   "features:\n- key: a\n  buckets: [{name: A, share: 1}]\n",
		"quoted values":      "features:\n- key: a\n  buckets: [{name: A, share: 1, value: \"1\"}]\n",
	} {
		if _, err := docfile.Parse("f.yaml", []byte(doc)); err != nil {
			t.Errorf("%s: Parse() = %v, want no error", name, err)
		}
	}
}

// TestCheckJSON: a JSON document's lists are held to the limits before it is
// decoded, in a body of its own or under a key of one.
func TestCheckJSON(t *testing.T) {
	many := func(n int, entry string) string { return strings.TrimSuffix(strings.Repeat(entry+",", n), ",") }
	tests := []struct {
		name, root, doc string
		want            string // "": no error
	}{
		{"features", "", `{"features":[` + many(2_000_000, "{}") + `]}`, "features has more than 1000 entries"},
		{"under document", "document", `{"comment":"x","document":{"features":[` + many(1001, "{}") + `]}}`, "features has more than 1000 entries"},
		{"overrides", "", `{"features":[{"key":"a"},{"key":"b","overrides":{` + many(feature.MaxOverrides+1, `"u":"A"`) + `}}]}`, "features[1].overrides has more than 10000 entries"},
		{"conditions", "", `{"features":[{"rules":[{"name":"r","conditions":[` + many(21, "{}") + `]}]}]}`, "features[0].rules[0].conditions has more than 20 entries"},
		{"within the limits", "", `{"features":[` + many(1000, `{"key":"a","buckets":[{"name":"A","share":1,"value":[`+many(100, "1")+`]}]}`) + `]}`, ""},
		{"outside the document", "document", `{"versions":{"features":[` + many(2000, "1") + `]},"document":{"features":[]}}`, ""},
		{"malformed", "", `{"features":[{},`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			bytes, took := allocated(func() { err = docfile.CheckJSON("body", []byte(tt.doc), tt.root) })
			t.Logf("%d bytes: %v, %d KB allocated", len(tt.doc), took, bytes>>10)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckJSON() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckJSON() = %v, want an error with %q", err, tt.want)
			}
			// The decoder's buffer holds the document; nothing is kept
			// per entry.
			if limit := uint64(2*len(tt.doc) + 4<<20); bytes > limit {
				t.Errorf("CheckJSON() allocated %d KB before refusing, want at most %d KB", bytes>>10, limit>>10)
			}
		})
	}
}
