package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollout/rollout/cmd/internal/serve"
	"github.com/rollout/rollout/internal/docfile"
	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/storetest"
)

// runWith runs the command line with ROLLOUT_SERVER and ROLLOUT_TOKEN set.
func runWith(t *testing.T, server, token string, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"ROLLOUT_SERVER": server, "ROLLOUT_TOKEN": token}
	err := run(context.Background(), args, &out, &errb, func(k string) string { return env[k] })
	return out.String(), err
}

// editDocument reads the document file, lets edit change it and writes it
// back as YAML.
func editDocument(t *testing.T, file string, edit func(d *document.Document)) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	d, err := docfile.Parse(file, data)
	if err != nil {
		t.Fatalf("the exported file does not parse: %v\n%s", err, data)
	}
	edit(&d)
	if data, err = docfile.Marshal(d, docfile.YAML); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func docFeatureOf(t *testing.T, d *document.Document, key string) *document.Feature {
	t.Helper()
	for i := range d.Features {
		if d.Features[i].Key == key {
			return &d.Features[i]
		}
	}
	t.Fatalf("the document has no feature %q", key)
	return nil
}

func share(f float64) *float64 { return &f }

// TestAsCode: export → edit → plan → apply → plan again against a server
// on SQLite and one on PostgreSQL, through the command line's run: the
// plan's churn is the preview endpoint's, exactly; each applied version
// carries the comment and the token's name; a change made between plan
// and apply makes the apply refuse with 412 and store nothing; guards
// refuse the whole apply.
func TestAsCode(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "rollout.db")
			if dialect == "postgres" {
				db = storetest.PostgresDSN(t)
			}
			testAsCode(t, db)
		})
	}
}

func testAsCode(t *testing.T, db string) {
	editor := createToken(t, db, "ci-bot", "editor")
	viewer := createToken(t, db, "pr-bot", "viewer")
	m := &serve.Server{Addr: "127.0.0.1:0", DBPath: db}
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, m: m, dbPath: db}
	t.Cleanup(s.stop)
	auth := bearer(editor)
	s.must(201, "POST", "/api/features", abcFeature("checkout"), auth...)
	s.must(201, "POST", "/api/features", map[string]any{"key": "banner", "buckets": []any{
		map[string]any{"name": "off", "replicas": 100, "value": false}, map[string]any{"name": "on", "replicas": 100, "value": true}}}, auth...)
	url := m.URL()
	dir := t.TempDir()
	file := filepath.Join(dir, "rollout.yaml")

	// Export, then plan: no change, exit 0.
	if _, err := runWith(t, url, viewer, "export", "--out", file); err != nil {
		t.Fatalf("export: %v", err)
	}
	out, err := runWith(t, url, viewer, "plan", "-f", file)
	if err != nil || !strings.Contains(out, "= checkout: no change (version 1)") {
		t.Fatalf("plan of the export = %v\n%s\nwant no change, exit 0", err, out)
	}

	// Edit: banner to 75/25, checkout described, a new
	// feature. The plan exits 2.
	editDocument(t, file, func(d *document.Document) {
		// Half a point of tolerance: plans quick even on a loaded machine.
		c := docFeatureOf(t, d, "banner")
		c.Tolerance = 0.005
		c.Buckets[0].Share, c.Buckets[1].Share = share(0.75), share(0.25)
		docFeatureOf(t, d, "checkout").Description = "the new checkout"
		d.Features = append(d.Features, document.Feature{Key: "new-flow", Tolerance: 0.005, Buckets: []document.Bucket{
			{Name: "off", Share: share(0.9)}, {Name: "on", Share: share(0.1), Value: json.RawMessage(`{"v":2}`)}}})
	})
	planFile := filepath.Join(dir, "plan.json")
	out, err = runWith(t, url, viewer, "plan", "-f", file, "--format", "json", "--out", planFile)
	if code, ok := errors.AsType[exitCode](err); !ok || code != exitChanges {
		t.Fatalf("plan of the edit = %v, want exit status 2\n%s", err, out)
	}
	var p document.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan --format json is not a plan: %v\n%s", err, out)
	}
	if p.Changed != 3 || p.Versions["checkout"] != 1 || p.Versions["new-flow"] != 0 {
		t.Errorf("plan: changed %d, versions %v; want 3 changes, checkout from 1, new-flow from 0", p.Changed, p.Versions)
	}
	for _, ch := range p.Changes {
		if ch.Feature != "banner" {
			continue
		}
		// The preview endpoint reports the same churn for the planned
		// buckets, exactly.
		var buckets []map[string]any
		for _, b := range ch.Buckets {
			buckets = append(buckets, map[string]any{"name": b.Name, "replicas": b.Replicas})
		}
		preview := s.must(200, "POST", "/api/features/banner/preview", map[string]any{"buckets": buckets}, auth...)
		if got := preview["churn"].(float64); got != ch.Churn || ch.Churn == 0 {
			t.Errorf("banner: plan churn %v, preview churn %v; want them equal, above 0", ch.Churn, got)
		}
		if got := preview["range_churn"].(float64); got != ch.RangeChurn {
			t.Errorf("banner: plan range churn %v, preview %v; want them equal", ch.RangeChurn, got)
		}
	}

	// Apply the saved plan: one batch, each version with the comment and
	// the token's name.
	out, err = runWith(t, url, editor, "apply", planFile, "--comment", "PR #42: banner to 75 %", "--max-churn", "1", "--max-total-churn", "3")
	if err != nil || !strings.Contains(out, "Applied 3 change(s)") {
		t.Fatalf("apply = %v\n%s", err, out)
	}
	for key, version := range map[string]int{"checkout": 2, "banner": 2, "new-flow": 1} {
		versions := s.must(200, "GET", "/api/features/"+key+"/versions", nil, auth...)["versions"].([]any)
		v := versions[0].(map[string]any)
		if len(versions) != version || v["comment"] != "PR #42: banner to 75 %" || v["actor"] != "ci-bot" {
			t.Errorf("%s: %d versions, newest by %v with comment %v; want %d, by ci-bot with the comment", key, len(versions), v["actor"], v["comment"], version)
		}
	}
	// A retry of the same apply applies nothing twice.
	if _, err = runWith(t, url, editor, "apply", planFile, "--comment", "PR #42: banner to 75 %", "--max-churn", "1", "--max-total-churn", "3"); err != nil {
		t.Errorf("retried apply = %v, want the first answer again", err)
	}
	if n := len(s.must(200, "GET", "/api/features/checkout/versions", nil, auth...)["versions"].([]any)); n != 2 {
		t.Errorf("checkout has %d versions after a retried apply, want 2", n)
	}
	// Plan again: no change, exit 0; so does a new export.
	if out, err = runWith(t, url, viewer, "plan", "-f", file); err != nil {
		t.Errorf("plan after apply = %v, want exit 0\n%s", err, out)
	}
	if _, err := runWith(t, url, viewer, "export", "--out", file); err != nil {
		t.Fatal(err)
	}
	if out, err = runWith(t, url, viewer, "plan", "-f", file); err != nil {
		t.Errorf("plan of the new export = %v, want exit 0\n%s", err, out)
	}

	// A change made between plan and apply: the apply refuses with 412
	// and stores nothing of the document.
	editDocument(t, file, func(d *document.Document) {
		docFeatureOf(t, d, "banner").Owner = "team-web"
		docFeatureOf(t, d, "checkout").Tags = []string{"payments"}
	})
	if _, err = runWith(t, url, viewer, "plan", "-f", file, "--out", planFile); !errors.Is(err, exitChanges) {
		t.Fatalf("plan = %v, want exit status 2", err)
	}
	s.must(200, "PATCH", "/api/features/checkout", map[string]any{"description": "changed meanwhile"}, auth...)
	before := dumpWith(t, s, auth)
	_, err = runWith(t, url, editor, "apply", planFile)
	if ae, ok := errors.AsType[*apiError](err); !ok || ae.Status != 412 || !strings.Contains(ae.Message, `feature "checkout" is at version 3, not 2`) {
		t.Errorf("apply after a change = %v, want 412 naming checkout", err)
	}
	if after := dumpWith(t, s, auth); after != before {
		t.Errorf("a refused apply changed the server:\nbefore %s\nafter  %s", before, after)
	}
	// Guards refuse the whole apply; a viewer may not apply.
	_, err = runWith(t, url, editor, "apply", "-f", file, "--max-total-churn", "0.5")
	if err != nil {
		t.Errorf("apply of tags and owner (no churn) under --max-total-churn 0.5 = %v", err)
	}
	editDocument(t, file, func(d *document.Document) {
		c := docFeatureOf(t, d, "banner")
		c.Tolerance = 0.005
		c.Buckets[0].Share, c.Buckets[1].Share = share(0.3), share(0.7)
	})
	before = dumpWith(t, s, auth)
	_, err = runWith(t, url, editor, "apply", "-f", file, "--max-churn", "0.01")
	if ae, ok := errors.AsType[*apiError](err); !ok || ae.Code != feature.EChurn {
		t.Errorf("apply over --max-churn = %v, want %s", err, feature.EChurn)
	}
	_, err = runWith(t, url, viewer, "apply", "-f", file)
	if ae, ok := errors.AsType[*apiError](err); !ok || ae.Status != 403 {
		t.Errorf("apply with a viewer token = %v, want 403", err)
	}
	if after := dumpWith(t, s, auth); after != before {
		t.Errorf("refused applies changed the server:\nbefore %s\nafter  %s", before, after)
	}
}

// TestAsCodeMalformedFiles: every malformed file is refused before any
// request, with its file and line.
func TestAsCodeMalformedFiles(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file, want string
	}{
		{"unknown field", "features:\n  - key: a\n    colour: red\n    buckets: [{name: A, share: 1}]\n", `:3:5: unknown field "colour"`},
		{"wrong type", "features:\n  - key: a\n    buckets:\n      - {name: A, share: \"all\"}\n", `:4:26: wrong type: a quoted string ("all") where a number is expected`},
		{"duplicate key", "features:\n  - key: a\n    buckets: [{name: A, share: 1}]\n    buckets: [{name: B, share: 1}]\n", `:4:5: mapping key "buckets" already defined at [3:5]`},
		{"not 100 %", "features:\n  - key: a\n    buckets:\n      - {name: A, share: 0.6}\n      - {name: B, share: 0.6}\n", ":4:7: features[0].buckets: the shares of feature \"a\" sum to 120 %, not 100 %"},
		{"JSON duplicate key", "{\"features\": [\n  {\"key\": \"a\",\n   \"key\": \"b\"}]}\n", `:3:4: mapping key "key" already defined`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			if err := os.WriteFile(file, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range [][]string{{"plan", "-f", file}, {"apply", "-f", file}} {
				_, err := runWith(t, "http://127.0.0.1:1", "", cmd...)
				if err == nil || !strings.Contains(err.Error(), file+tc.want) {
					t.Errorf("%s = %v, want an error with %q", cmd[0], err, file+tc.want)
				}
			}
		})
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("# 10 MB of comments\n"), 10<<20/20), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runWith(t, "http://127.0.0.1:1", "", "plan", "-f", big)
	if err == nil || !strings.Contains(err.Error(), big+": the file is 10485760 bytes, more than a document may have") {
		t.Errorf("plan of a 10 MB file = %v, want an error on its size", err)
	}
}

// TestBinaryPlanExitCodes: the binary exits 0 when the document changes
// nothing, 2 when it changes something, 1 on an error.
func TestBinaryPlanExitCodes(t *testing.T) {
	s := startServer(t, "")
	s.must(201, "POST", "/api/features", abcFeature("checkout"))
	dir := t.TempDir()
	file := filepath.Join(dir, "rollout.yaml")
	binary := buildBinary(t)
	env := append(os.Environ(), "ROLLOUT_SERVER="+s.m.URL())
	cmd := exec.Command(binary, "export", "--out", file)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rollout export: %v\n%s", err, out)
	}
	exit := func(args ...string) int {
		cmd := exec.Command(binary, args...)
		cmd.Env = env
		err := cmd.Run()
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	if got := exit("plan", "-f", file); got != 0 {
		t.Errorf("rollout plan (no change) exited %d, want 0", got)
	}
	editDocument(t, file, func(d *document.Document) { d.Features[0].Description = "changed" })
	if got := exit("plan", "-f", file); got != 2 {
		t.Errorf("rollout plan (a change) exited %d, want 2", got)
	}
	if got := exit("plan", "-f", filepath.Join(dir, "missing.yaml")); got != 1 {
		t.Errorf("rollout plan (no such file) exited %d, want 1", got)
	}
	// Segments and rules: the export with them plans to no change; an
	// edit of a segment exits 2; an in_segment naming a segment neither
	// the file nor the server has exits 1 with its line.
	s.must(201, "POST", "/api/segments", map[string]any{"key": "staff", "conditions": []any{map[string]any{"attribute": "email", "op": "ends_with", "value": "@example.com"}}})
	s.must(200, "PUT", "/api/features/checkout/rules", map[string]any{"rules": []any{
		map[string]any{"name": "staff", "conditions": []any{map[string]any{"op": "in_segment", "value": "staff"}}, "serve": map[string]any{"bucket": "A"}}}})
	cmd = exec.Command(binary, "export", "--out", file)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rollout export: %v\n%s", err, out)
	}
	if got := exit("plan", "-f", file); got != 0 {
		t.Errorf("rollout plan (the export with rules and a segment) exited %d, want 0", got)
	}
	editDocument(t, file, func(d *document.Document) { d.Segments[0].Description = "our people" })
	if got := exit("plan", "-f", file); got != 2 {
		t.Errorf("rollout plan (a segment changed) exited %d, want 2", got)
	}
	editDocument(t, file, func(d *document.Document) { d.Features[0].Rules[0].Conditions[0].Value = json.RawMessage(`"nobody"`) })
	cmd = exec.Command(binary, "plan", "-f", file)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	ee, ok := errors.AsType[*exec.ExitError](err)
	data, _ := os.ReadFile(file)
	line := 0
	for i, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "op: in_segment") {
			line = i + 1 // the condition starts on its first field's line
		}
	}
	if !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), fmt.Sprintf("%s:%d:", file, line)) || !strings.Contains(string(out), `in_segment names segment "nobody"`) {
		t.Errorf("rollout plan (in_segment of no segment) = %v\n%s\nwant exit 1, the file's line and the segment", err, out)
	}
}

// dumpWith is dump with a token.
func dumpWith(t *testing.T, s *server, auth []string) string {
	t.Helper()
	var b bytes.Buffer
	fs := s.must(200, "GET", "/api/features", nil, auth...)
	json.NewEncoder(&b).Encode(fs)
	for _, f := range fs["features"].([]any) {
		key := f.(map[string]any)["key"].(string)
		json.NewEncoder(&b).Encode(s.must(200, "GET", "/api/features/"+key+"/versions", nil, auth...))
	}
	return b.String()
}

// TestAsCodeTargeting: rules, bucket_by and segments round-trip through
// export and plan on SQLite and PostgreSQL; an edit of rules and of a
// segment plans with the preview endpoint's populations (and the features
// the segment change makes new versions of), applies as one batch, and
// plans again to no change; a segment changed between plan and apply
// makes the apply refuse with 412 and store nothing.
func TestAsCodeTargeting(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "rollout.db")
			if dialect == "postgres" {
				db = storetest.PostgresDSN(t)
			}
			testAsCodeTargeting(t, db)
		})
	}
}

func cond(attr, op, value string) feature.Condition {
	return feature.Condition{Attribute: attr, Op: op, Value: json.RawMessage(value)}
}

func testAsCodeTargeting(t *testing.T, db string) {
	// An admin: a change of bucket_by moves about half the users, over
	// the editors' limit.
	editor := createToken(t, db, "ci-bot", "admin")
	viewer := createToken(t, db, "pr-bot", "viewer")
	m := &serve.Server{Addr: "127.0.0.1:0", DBPath: db}
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, m: m, dbPath: db}
	t.Cleanup(s.stop)
	auth := bearer(editor)
	s.must(201, "POST", "/api/segments", map[string]any{"key": "staff", "description": "our people",
		"conditions": []any{map[string]any{"attribute": "email", "op": "ends_with", "value": "@example.com"}}}, auth...)
	s.must(201, "POST", "/api/features", abcFeature("checkout"), auth...)
	s.must(200, "PUT", "/api/features/checkout/rules", map[string]any{"rules": []any{
		map[string]any{"name": "staff-first", "conditions": []any{map[string]any{"op": "in_segment", "value": "staff"}}, "serve": map[string]any{"bucket": "A"}},
		map[string]any{"name": "eu", "conditions": []any{map[string]any{"attribute": "country", "op": "in", "value": []any{"FR", "DE"}}}, "serve": map[string]any{"ring": true, "bucket_by": "account"}},
	}}, auth...)
	s.must(200, "PATCH", "/api/features/checkout", map[string]any{"bucket_by": "org"}, auth...)
	s.must(201, "POST", "/api/features", map[string]any{"key": "banner", "buckets": []any{
		map[string]any{"name": "off", "replicas": 100}, map[string]any{"name": "on", "replicas": 100}}}, auth...)
	url := m.URL()
	dir := t.TempDir()
	file := filepath.Join(dir, "rollout.yaml")

	// The export carries rules, bucket_by and segments, and plans to no
	// change.
	if _, err := runWith(t, url, viewer, "export", "--out", file); err != nil {
		t.Fatalf("export: %v", err)
	}
	data, _ := os.ReadFile(file)
	for _, want := range []string{"segments:", "key: staff", "in_segment", "bucket_by: org", "bucket_by: account", "name: staff-first"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the export lacks %q:\n%s", want, data)
		}
	}
	if out, err := runWith(t, url, viewer, "plan", "-f", file); err != nil || !strings.Contains(out, "= segment staff: no change (version 1)") {
		t.Fatalf("plan of the export = %v\n%s\nwant no change, exit 0", err, out)
	}

	// Edit: staff's conditions, a new segment beta, rules on banner that
	// use beta, checkout's bucket_by back to the user ID.
	bannerRules := []feature.Rule{
		{Name: "beta-on", Conditions: []feature.Condition{cond("", feature.OpInSegment, `"beta"`)}, Serve: feature.Serve{Bucket: "on"}},
		{Name: "old-app", Conditions: []feature.Condition{cond("app_version", feature.OpSemverLt, `"2.0.0"`)}, Serve: feature.Serve{Bucket: "off"}},
	}
	editDocument(t, file, func(d *document.Document) {
		d.Segments[0].Conditions = []feature.Condition{cond("email", feature.OpMatches, `"@(example\\.com|example\\.org)$"`)}
		d.Segments = append(d.Segments, document.Segment{Key: "beta", Description: "beta testers", Conditions: []feature.Condition{cond("beta", feature.OpEq, "true")}})
		docFeatureOf(t, d, "banner").Rules = bannerRules
		docFeatureOf(t, d, "checkout").BucketBy = ""
	})
	planFile := filepath.Join(dir, "plan.json")
	out, err := runWith(t, url, viewer, "plan", "-f", file, "--format", "json", "--out", planFile)
	if code, ok := errors.AsType[exitCode](err); !ok || code != exitChanges {
		t.Fatalf("plan of the edit = %v, want exit status 2\n%s", err, out)
	}
	var p document.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan --format json is not a plan: %v\n%s", err, out)
	}
	if p.Changed != 4 || p.SegmentVersions["staff"] != 1 || p.SegmentVersions["beta"] != 0 {
		t.Errorf("plan: changed %d, segment versions %v; want 4 changes, staff from 1, beta from 0\n%s", p.Changed, p.SegmentVersions, out)
	}
	for _, sc := range p.Segments {
		switch {
		case sc.Segment == "staff" && (sc.Action != document.ActionUpdate || strings.Join(sc.Features, ",") != "checkout" || strings.Join(sc.Fields, ",") != "conditions"):
			t.Errorf("staff: %+v; want an update of its conditions making a new version of checkout", sc)
		case sc.Segment == "beta" && (sc.Action != document.ActionCreate || strings.Join(sc.Features, ",") != "banner"):
			t.Errorf("beta: %+v; want a create, used by banner", sc)
		}
	}
	for _, ch := range p.Changes {
		switch ch.Feature {
		case "banner":
			// The populations are those the rules preview gives (its
			// domain function: the preview endpoint itself refuses rules
			// naming beta, which does not exist yet).
			want, _ := json.Marshal(feature.RuleChanges(nil, bannerRules))
			got, _ := json.Marshal(ch.Rules)
			if string(got) != string(want) || len(ch.Rules) != 2 || strings.Join(ch.Fields, ",") != "rules" {
				t.Errorf("banner: fields %v, rules %s; want rules, the preview's %s", ch.Fields, got, want)
			}
		case "checkout":
			if strings.Join(ch.Fields, ",") != "bucket_by" || len(ch.Rules) != 1 || !strings.Contains(ch.Rules[0].Text, "in segment staff") {
				t.Errorf("checkout: fields %v, rules %+v; want bucket_by, and staff's change as a population", ch.Fields, ch.Rules)
			}
		}
	}
	text, err := runWith(t, url, viewer, "plan", "-f", file)
	for _, want := range []string{"~ segment staff: update conditions, version 1 → 2", "+ segment beta: create", "new versions of the features that use it: checkout", "rules: users matching"} {
		if !strings.Contains(text, want) {
			t.Errorf("plan text lacks %q (%v):\n%s", want, err, text)
		}
	}

	// Apply the saved plan; then the file and a new export plan to no
	// change.
	out, err = runWith(t, url, editor, "apply", planFile, "--comment", "PR #7: beta")
	if err != nil || !strings.Contains(out, "Applied 4 change(s)") {
		t.Fatalf("apply = %v\n%s", err, out)
	}
	staff := s.must(200, "GET", "/api/segments/staff", nil, auth...)
	if staff["version"].(float64) != 2 || !strings.Contains(string(mustMarshal(t, staff)), "example\\\\.org") {
		t.Errorf("staff after apply = %v, want version 2 with the file's conditions", staff)
	}
	sv := s.must(200, "GET", "/api/segments/staff/versions", nil, auth...)
	if vs, _ := sv["versions"].([]any); len(vs) != 2 || vs[0].(map[string]any)["comment"] != "PR #7: beta" || vs[0].(map[string]any)["actor"] != "ci-bot" {
		t.Errorf("staff versions = %v, want 2, the newest by ci-bot with the comment", sv)
	}
	if out, err = runWith(t, url, viewer, "plan", "-f", file); err != nil {
		t.Errorf("plan after apply = %v, want exit 0\n%s", err, out)
	}
	if _, err := runWith(t, url, viewer, "export", "--out", file); err != nil {
		t.Fatal(err)
	}
	if out, err = runWith(t, url, viewer, "plan", "-f", file); err != nil {
		t.Errorf("plan of the new export = %v, want exit 0\n%s", err, out)
	}

	// A segment changed between plan and apply: 412, nothing stored.
	editDocument(t, file, func(d *document.Document) {
		for i := range d.Segments {
			if d.Segments[i].Key == "beta" {
				d.Segments[i].Description = "from the file"
			}
		}
		docFeatureOf(t, d, "banner").Description = "from the file"
	})
	if _, err = runWith(t, url, viewer, "plan", "-f", file, "--out", planFile); !errors.Is(err, exitChanges) {
		t.Fatalf("plan = %v, want exit status 2", err)
	}
	s.must(200, "PUT", "/api/segments/beta", map[string]any{"description": "meanwhile",
		"conditions": []any{map[string]any{"attribute": "beta", "op": "eq", "value": true}}}, auth...)
	before := dumpWith(t, s, auth) + string(mustMarshal(t, s.must(200, "GET", "/api/segments", nil, auth...)))
	_, err = runWith(t, url, editor, "apply", planFile)
	if ae, ok := errors.AsType[*apiError](err); !ok || ae.Status != 412 || !strings.Contains(ae.Message, `segment "beta" is at version 2, not 1`) {
		t.Errorf("apply after a segment change = %v, want 412 naming beta", err)
	}
	if after := dumpWith(t, s, auth) + string(mustMarshal(t, s.must(200, "GET", "/api/segments", nil, auth...))); after != before {
		t.Errorf("a refused apply changed the server:\nbefore %s\nafter  %s", before, after)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
