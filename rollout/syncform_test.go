package rollout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/feature/hll"
)

// syncUsers are users to compare evaluations for: the overridden ones of
// syncFeatures and many others.
func syncUsers() []string {
	out := []string{"u7", "vip@example.com", "ü", "u7 "}
	for i := range 2000 {
		out = append(out, fmt.Sprintf("u%d", i))
	}
	return out
}

// syncService is a service with features of every kind the sync form
// tells apart: salted or not, with overrides, disabled with a fallback.
func syncService(t *testing.T) *rollout.Service {
	t.Helper()
	svc, _ := newService(t)
	a := abc("a")
	a.Salt, a.Description = "pepper", "secret plans"
	a.Overrides = map[string]string{"vip@example.com": "C", "u7": "A", "u11": "B"}
	a.Buckets[1].Value = json.RawMessage("{\n  \"html\": \"<b>&\",\n  \"n\": [1, 2.5]\n}")
	mustCreate(t, svc, a)
	b := abc("b")
	b.Salt, b.Overrides = "", map[string]string{"u7": "C", "vip@example.com": "A"}
	mustCreate(t, svc, b)
	c := abc("c")
	c.Enabled, c.Fallback = false, "B"
	c.Overrides = map[string]string{"u7": "C"}
	mustCreate(t, svc, c)
	return svc
}

// sameJSON reports whether a and b are the same JSON value, or both empty.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && cmp.Equal(x, y)
}

// sameAnswers checks that got serves every user of syncUsers what want
// serves, feature by feature, values byte for byte.
func sameAnswers(t *testing.T, want, got *feature.Snapshot, opts ...cmp.Option) {
	t.Helper()
	if diff := cmp.Diff(want.Keys(), got.Keys()); diff != "" {
		t.Fatalf("Keys() mismatch (-want +got):\n%s", diff)
	}
	overridden := 0
	for _, key := range want.Keys() {
		for _, user := range syncUsers() {
			w, _ := want.Peek(key, user)
			g, err := got.Peek(key, user)
			if err != nil || !cmp.Equal(w, g, opts...) {
				t.Fatalf("Peek(%q, %q) = %+v, %v; want %+v", key, user, g, err, w)
			}
			if w.Reason == feature.ReasonOverride {
				overridden++
			}
		}
	}
	if overridden == 0 {
		t.Fatal("no user compared is overridden")
	}
}

// TestSyncDocument: a snapshot decoded from the service's sync document
// serves every user, overridden or not, what the service serves; the
// document holds no user ID and no description, and the decoded snapshot
// has the server's SyncTag.
func TestSyncDocument(t *testing.T) {
	svc := syncService(t)
	data := svc.Snapshot().AppendSync(nil)
	for _, secret := range []string{"vip@example.com", `"u7"`, "u11", "secret plans", "description", "created_at"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("the sync document holds %q:\n%s", secret, data)
		}
	}
	if want := feature.OverrideHash("a", "pepper", "vip@example.com"); !strings.Contains(string(data), want) {
		t.Errorf("the sync document lacks the hash %s of a's override:\n%s", want, data)
	}
	if want := feature.OverrideHash("b", "", "u7"); !strings.Contains(string(data), want) {
		t.Errorf("the sync document lacks the hash %s of b's override:\n%s", want, data)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil || compact.String() != strings.TrimSuffix(string(data), "\n") {
		t.Errorf("the sync document is not compact JSON on one line (%v):\n%s", err, data)
	}
	for _, key := range svc.Snapshot().Keys() {
		form, _ := svc.Snapshot().SyncFeature(key)
		var got feature.SyncFeature
		if err := json.Unmarshal(form, &got); err != nil {
			t.Fatal(err)
		}
		f, _ := svc.Snapshot().Feature(key)
		want := feature.SyncFeature{ID: f.ID, Key: f.Key, Enabled: f.Enabled, Salt: f.Salt, Fallback: f.Fallback, Buckets: f.Buckets, Version: f.Version}
		for user, bucket := range f.Overrides {
			if want.Overrides == nil {
				want.Overrides = map[string][]string{}
			}
			want.Overrides[bucket] = append(want.Overrides[bucket], feature.OverrideHash(f.Key, f.Salt, user))
		}
		for _, hs := range want.Overrides {
			slices.Sort(hs)
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(sameJSON)); diff != "" {
			t.Errorf("sync form of %s mismatch (-want +got):\n%s", key, diff)
		}
	}
	if !strings.Contains(string(data), `"<b>&"`) {
		t.Errorf("the sync document escapes the values' HTML characters: clients would serve other bytes:\n%s", data)
	}
	snap, err := feature.DecodeSync(data)
	if err != nil {
		t.Fatalf("DecodeSync() = %v", err)
	}
	if snap.Revision() != svc.Snapshot().Revision() {
		t.Errorf("Revision() = %d, want %d", snap.Revision(), svc.Snapshot().Revision())
	}
	sameAnswers(t, svc.Snapshot(), snap)
	if got, want := snap.SyncTag(), svc.Snapshot().SyncTag(); got != want {
		t.Errorf("SyncTag() of the decoded snapshot = %s, want the server's %s", got, want)
	}
	if again := snap.AppendSync(nil); string(again) != string(data) {
		t.Errorf("the decoded snapshot's document differs:\n%s\nwant\n%s", again, data)
	}
}

// TestSyncTagFollowsContent: the tag changes with the revision and with any
// feature's sync form, and not with a description.
func TestSyncTagFollowsContent(t *testing.T) {
	svc := syncService(t)
	caught := func() *feature.Snapshot {
		if _, err := svc.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		return svc.Snapshot()
	}
	before := caught()
	mustChange(t, svc, "a", change.SetOverride("new@example.com", "B"))
	after := caught()
	if before.SyncTag() == after.SyncTag() {
		t.Error("SyncTag() unchanged by a new override")
	}
	tags := map[string]bool{before.SyncTag(): true, after.SyncTag(): true}
	if _, err := feature.NewSnapshot(nil, 1); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []int64{1, 2} {
		s, _ := feature.NewSnapshot(nil, rev)
		if tags[s.SyncTag()] {
			t.Errorf("SyncTag() of an empty snapshot at %d repeats another", rev)
		}
		tags[s.SyncTag()] = true
	}
}

// TestApplySync: a client snapshot that applies the changed features' sync
// forms (and deletions) equals, answers and tag, the server's snapshot
// after the change.
func TestApplySync(t *testing.T) {
	svc := syncService(t)
	ctx := context.Background()
	client, err := feature.DecodeSync(svc.Snapshot().AppendSync(nil))
	if err != nil {
		t.Fatal(err)
	}
	mustChange(t, svc, "a", change.SetOverride("u5", "C"))
	mustChange(t, svc, "b", change.Patch(nil, ptr(false), nil))
	if _, err := svc.Archive(ctx, "c", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	d := abc("d")
	d.Overrides = map[string]string{"u9": "B"}
	mustCreate(t, svc, d)
	if _, err := svc.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	server := svc.Snapshot()
	var set []json.RawMessage
	for _, key := range []string{"a", "b", "d"} {
		data, ok := server.SyncFeature(key)
		if !ok {
			t.Fatalf("SyncFeature(%q) missing", key)
		}
		set = append(set, data)
	}
	next, err := client.ApplySync(server.Revision(), set, []string{"c"})
	if err != nil {
		t.Fatalf("ApplySync() = %v", err)
	}
	sameAnswers(t, server, next)
	if got, want := next.SyncTag(), server.SyncTag(); got != want {
		t.Errorf("SyncTag() after ApplySync = %s, want the server's %s", got, want)
	}
	if e, _ := next.Peek("a", "u5"); e.Bucket != "C" || e.Reason != feature.ReasonOverride {
		t.Errorf("Peek(a, u5) after the change = %+v, want C by override", e)
	}
	if _, err := client.Peek("c", "u1"); err != nil {
		t.Errorf("ApplySync changed the snapshot it was called on: c is gone from it")
	}
}

// TestDecodeSyncRefuses: documents and features that cannot be read are
// refused, a feature at a time.
func TestDecodeSyncRefuses(t *testing.T) {
	good := `{"id":"1","key":"g","enabled":true,"salt":"s","buckets":[{"name":"A","replicas":1}],"version":1}`
	tooMany := map[string][]string{"A": {}}
	for i := range feature.MaxOverrides + 1 {
		tooMany["A"] = append(tooMany["A"], fmt.Sprintf("%032x", i))
	}
	many, _ := json.Marshal(map[string]any{"id": "1", "key": "m", "enabled": true, "buckets": []any{map[string]any{"name": "A", "replicas": 1}}, "overrides": tooMany, "version": 1})
	for _, tt := range []struct{ name, feature, want string }{
		{"bad hash", `{"id":"1","key":"x","enabled":true,"buckets":[{"name":"A","replicas":1}],"overrides":{"A":["zz"]},"version":1}`, "32 hex"},
		{"non-hex hash", `{"id":"1","key":"x","enabled":true,"buckets":[{"name":"A","replicas":1}],"overrides":{"A":["` + strings.Repeat("g", 32) + `"]},"version":1}`, "32 hex"},
		{"unknown bucket", `{"id":"1","key":"x","enabled":true,"buckets":[{"name":"A","replicas":1}],"overrides":{"Z":["` + strings.Repeat("0", 32) + `"]},"version":1}`, "bucket \"Z\""},
		{"hash twice", `{"id":"1","key":"x","enabled":true,"buckets":[{"name":"A","replicas":1},{"name":"B","replicas":1}],"overrides":{"A":["` + strings.Repeat("0", 32) + `"],"B":["` + strings.Repeat("0", 32) + `"]},"version":1}`, "twice"},
		{"invalid feature", `{"id":"1","key":"X X","enabled":true,"buckets":[{"name":"A","replicas":1}],"version":1}`, "invalid"},
		{"too many overrides", string(many), "at most"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc := `{"format":2,"revision":3,"features":[` + good + `,` + tt.feature + `]}`
			snap, err := feature.DecodeSync([]byte(doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeSync() error = %v, want one about %q", err, tt.want)
			}
			if snap == nil || !slices.Equal(snap.Keys(), []string{"g"}) {
				t.Errorf("DecodeSync() kept %v, want [g]", snap)
			}
		})
	}
	for _, doc := range []string{`{`, `{"format":3,"revision":1,"features":[]}`, `{"format":2,"features":{}}`, `{"features":[1]}`} {
		if snap, err := feature.DecodeSync([]byte(doc)); err == nil || snap != nil || feature.ErrorCode(err) != feature.EInvalid {
			t.Errorf("DecodeSync(%s) = %v, %v; want nil and an invalid error", doc, snap, err)
		}
	}
}

// TestDecodeSyncFirstFormat: a document of the first format (features
// whole, as older clients cached them) still decodes, answering as the
// server does.
func TestDecodeSyncFirstFormat(t *testing.T) {
	svc := syncService(t)
	var features []feature.Feature
	for _, key := range svc.Snapshot().Keys() {
		f, _ := svc.Snapshot().Feature(key)
		features = append(features, f)
	}
	old, _ := json.Marshal(map[string]any{"revision": svc.Snapshot().Revision(), "features": features})
	snap, err := feature.DecodeSync(old)
	if err != nil {
		t.Fatalf("DecodeSync(first format) = %v", err)
	}
	// That format's values went through json.Marshal, which escapes < > &.
	sameAnswers(t, svc.Snapshot(), snap, cmp.Comparer(sameJSON))
	// Its SyncTag may differ from the server's (those escapes): the client
	// fetches the snapshot in full once, then follows the tags.
}

func TestSnapshotChanged(t *testing.T) {
	a, b, c := abc("a"), abc("b"), abc("c")
	for i, f := range []*feature.Feature{&a, &b, &c} {
		f.ID, f.Version = fmt.Sprintf("id%d", i), 1
	}
	before, _ := feature.NewSnapshot([]feature.Feature{a, b, c}, 1)
	b2 := b.Clone()
	b2.Version = 2
	c2 := c.Clone()
	c2.ID = "other"
	d := abc("d")
	d.ID, d.Version = "id3", 1
	after, _ := feature.NewSnapshot([]feature.Feature{b2, c2, d}, 2)
	if diff := cmp.Diff([]string{"a", "b", "c", "d"}, before.Changed(after)); diff != "" {
		t.Errorf("Changed() mismatch (-want +got):\n%s", diff)
	}
	same, _ := feature.NewSnapshot([]feature.Feature{a, b, c}, 3)
	if got := before.Changed(same); len(got) != 0 {
		t.Errorf("Changed(same features) = %q, want none", got)
	}
}

func TestSnapshotTakeExposures(t *testing.T) {
	a := abc("a")
	a.ID, a.Version, a.Enabled = "id-a", 4, false
	b := abc("b")
	b.ID, b.Version = "id-b", 2
	b.Overrides = map[string]string{"u": "C"}
	// c: a rule serves B to plan = pro; the ring serves everyone else.
	c := abc("c")
	c.ID, c.Version = "id-c", 1
	c.Rules = []feature.Rule{{Name: "pro", Conditions: []feature.Condition{{Attribute: "plan", Op: "eq", Value: json.RawMessage(`"pro"`)}}, Serve: feature.Serve{Bucket: "B"}}}
	snap, _ := feature.NewSnapshot([]feature.Feature{a, b, c}, 1)
	for range 3 {
		snap.Evaluate("a", "u")
		snap.Evaluate("b", "u")
		snap.EvaluateContext("c", "u", feature.Context{"plan": "pro"})
	}
	snap.EvaluateContext("c", "u", feature.Context{"plan": "free"})
	ring, _ := snap.Peek("c", "u")
	snap.Peek("b", "u") // not counted
	none, pro := "", "pro"
	var one hll.Sketch // every count's one distinct user, u
	one.Insert(hll.Hash("u"))
	u := one.Append(nil)
	want := []feature.Exposure{
		{Feature: "a", FeatureID: "id-a", Version: 4, Bucket: "", Count: 3, Rule: &none, Users: u},
		{Feature: "b", FeatureID: "id-b", Version: 2, Bucket: "C", Count: 3, Rule: &none, Users: u},
		{Feature: "c", FeatureID: "id-c", Version: 1, Bucket: "B", Count: 3, Rule: &pro, Users: u},
		{Feature: "c", FeatureID: "id-c", Version: 1, Bucket: ring.Bucket, Count: 1, Rule: &none, Users: u},
	}
	got := snap.TakeExposures(nil)
	sortExposures := func(es []feature.Exposure) {
		slices.SortFunc(es, func(x, y feature.Exposure) int {
			return strings.Compare(x.Feature+"/"+*x.Rule, y.Feature+"/"+*y.Rule)
		})
	}
	sortExposures(want)
	sortExposures(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TakeExposures() mismatch (-want +got):\n%s", diff)
	}
	if got := snap.TakeExposures(nil); len(got) != 0 {
		t.Errorf("TakeExposures() again = %+v, want none", got)
	}
}

func TestValidateExposureBatch(t *testing.T) {
	ok := feature.Exposure{FeatureID: "id", Version: 1, Bucket: "A", Count: 1}
	for _, tt := range []struct {
		name   string
		batch  string
		counts []feature.Exposure
		want   string // in the message; "" for valid
	}{
		{"valid", "0123456789abcdef", []feature.Exposure{ok, {FeatureID: "id", Version: 1, Count: 2}}, ""},
		{"short id", "abc", nil, "batch ID"},
		{"bad id", "abc/defgh", nil, "batch ID"},
		{"no feature id", "batch-01", []feature.Exposure{{Version: 1, Bucket: "A", Count: 1}}, "feature_id"},
		{"version 0", "batch-01", []feature.Exposure{{FeatureID: "id", Bucket: "A", Count: 1}}, "version"},
		{"bad bucket", "batch-01", []feature.Exposure{{FeatureID: "id", Version: 1, Bucket: "a b", Count: 1}}, "bucket"},
		{"zero count", "batch-01", []feature.Exposure{{FeatureID: "id", Version: 1, Bucket: "A"}}, "count must be from 1"},
		{"too many", "batch-01", make([]feature.Exposure, feature.MaxExposureBatch+1), "at most"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := feature.ValidateExposureBatch(tt.batch, tt.counts)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidateExposureBatch() = %v, want nil", err)
			case tt.want != "" && (feature.ErrorCode(err) != feature.EInvalid || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("ValidateExposureBatch() = %v, want an invalid error about %q", err, tt.want)
			}
		})
	}
}
