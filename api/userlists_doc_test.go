package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestUserListDocuments: a document names a user list by reference. The
// export lists it by key with list: true and none of its IDs, and plans
// to no change; a document that changes its description applies without
// touching its users; one naming a new list creates it empty; one that
// gives a list conditions, or makes a segment of conditions a list, is
// refused at the segment, changing nothing.
func TestUserListDocuments(t *testing.T) {
	s := newRulesServer(t)
	s.must(http.StatusCreated, "POST", "/api/segments", map[string]any{"key": "beta", "description": "testers", "users": listIDs("secret-user", 300)})
	s.must(http.StatusCreated, "POST", "/api/segments", map[string]any{"key": "staff", "conditions": []any{map[string]any{"attribute": "email", "op": "ends_with", "value": "@example.com"}}})
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", `{"rules":[{"name":"beta","conditions":[{"op":"in_segment","value":"beta"}],"serve":{"bucket":"on"}}]}`)

	export := s.must(http.StatusOK, "GET", "/api/export", nil)
	d := export.json(t)
	if p := docPlan(t, s.must(http.StatusOK, "POST", "/api/plan", d)); p.Changed != 0 {
		t.Errorf("plan of the export: %d changes, want none", p.Changed)
	}
	segment := func(d map[string]any, key string) map[string]any {
		for _, sg := range d["segments"].([]any) {
			if sg := sg.(map[string]any); sg["key"] == key {
				return sg
			}
		}
		t.Fatalf("the document has no segment %q", key)
		return nil
	}

	if beta := segment(d, "beta"); strings.Contains(string(export.body), "secret-user") || beta["list"] != true || beta["conditions"] != nil {
		t.Fatalf("the export = %s, want beta as list: true without its IDs", export.body)
	}
	segment(d, "beta")["description"] = "our testers"
	d["segments"] = append(d["segments"].([]any), map[string]any{"key": "gamma", "list": true})
	s.must(http.StatusOK, "POST", "/api/apply", map[string]any{"document": d})
	snap := s.svc.Snapshot()
	if seg, _ := snap.Segment("beta"); seg.Description != "our testers" || seg.Size != 300 || snap.CompiledSegments()["beta"].Users().Len() != 300 || !snap.CompiledSegments()["beta"].Users().Has("secret-user-7") {
		t.Errorf("after applying a description, beta = %+v with %d users, want 300 users kept", seg, snap.CompiledSegments()["beta"].Users().Len())
	}
	if e := s.must(http.StatusOK, "GET", "/evaluate?feature=checkout&user=secret-user-7", nil).json(t); e["rule"] != "beta" {
		t.Errorf("a listed user after the apply: %v", e)
	}
	if seg, ok := snap.Segment("gamma"); !ok || !seg.List || seg.Size != 0 {
		t.Errorf("gamma after the apply = %+v, %v; want an empty user list", seg, ok)
	}
	s.must(http.StatusOK, "POST", "/api/segments/gamma/users", map[string]any{"add": []string{"a"}})

	for name, edit := range map[string]func(d map[string]any){
		"a list with conditions": func(d map[string]any) {
			segment(d, "beta")["conditions"] = []any{map[string]any{"attribute": "plan", "op": "eq", "value": "pro"}}
		},
		"a list without list: true": func(d map[string]any) { delete(segment(d, "beta"), "list") },
		"conditions made a list": func(d map[string]any) {
			sg := segment(d, "staff")
			delete(sg, "conditions")
			sg["list"] = true
		},
	} {
		d := s.must(http.StatusOK, "GET", "/api/export", nil).json(t)
		edit(d)
		if r := s.do("POST", "/api/apply", map[string]any{"document": d}); r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "segments[") {
			t.Errorf("%s: apply = %d %s, want 422 at the segment", name, r.status, r.body)
		}
	}
	if l := s.svc.Snapshot().CompiledSegments()["beta"].Users(); l.Len() != 300 {
		t.Errorf("after refused documents beta holds %d users, want 300", l.Len())
	}
}
