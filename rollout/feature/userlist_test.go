package feature

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// listFeature returns a feature whose one rule serves "on" to the users
// of the user list "beta", by bucketBy ("": the user ID), and the ring
// (all "off") to everyone else.
func listFeature(bucketBy string) Feature {
	return Feature{Key: "gate", Enabled: true, Salt: "gate", Version: 1, BucketBy: bucketBy,
		Buckets: []Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 0}},
		Rules:   []Rule{{Name: "beta", Conditions: []Condition{{Op: OpInSegment, Value: json.RawMessage(`"beta"`)}}, Serve: Serve{Bucket: "on"}}}}
}

func listSnapshot(t testing.TB, f Feature, users []string) *Snapshot {
	t.Helper()
	seg := Segment{Key: "beta", List: true, Size: len(users), Version: 1}
	if err := seg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	segs := map[string]*CompiledSegment{"beta": CompileUserList(seg, NewUserList("beta", users))}
	return NewSnapshotOf([]*Compiled{Compile(f, segs)}, segs, 1)
}

// TestUserListMatchesTheBucketingKey: in_segment on a user list holds for
// the users it names, by the user ID, or by the value of the feature's
// bucket_by attribute (a number by its shortest decimal form, as the
// ring hashes it); a context without that attribute matches no one.
func TestUserListMatchesTheBucketingKey(t *testing.T) {
	byUser := listSnapshot(t, listFeature(""), []string{"ann", "bob", "bob"})
	byOrg := listSnapshot(t, listFeature("org"), []string{"acme", "42", "true"})
	for _, tc := range []struct {
		snap *Snapshot
		user string
		ctx  Context
		want string
	}{
		{byUser, "ann", nil, "on"},
		{byUser, "bob", Context{"org": "zzz"}, "on"},
		{byUser, "Ann", nil, "off"},
		{byUser, "carol", nil, "off"},
		{byOrg, "carol", Context{"org": "acme"}, "on"},
		{byOrg, "ann", Context{"org": "initech"}, "off"},
		{byOrg, "dan", Context{"org": 42.0}, "on"},
		{byOrg, "dan", Context{"org": 42}, "on"},
		{byOrg, "erin", Context{"org": true}, "on"},
		{byOrg, "acme", nil, ""}, // no org: the default outcome (no fallback)
	} {
		got, err := tc.snap.EvaluateContext("gate", tc.user, tc.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.Bucket != tc.want {
			t.Errorf("EvaluateContext(gate by %q, %q, %v) = %q (%s), want %q", tc.snap.Compiled("gate").Feature().BucketBy, tc.user, tc.ctx, got.Bucket, got.Reason, tc.want)
		}
	}
	if n := byUser.CompiledSegments()["beta"].Users().Len(); n != 2 {
		t.Errorf("a list of ann, bob, bob holds %d users, want 2", n)
	}
}

// TestUserListSyncForm: a feature's sync form carries the list it uses
// hashed (ListUserHash, which is OverrideHash of a feature named as the
// segment, without a salt), never an ID; the in-app client's snapshot
// decoded from it evaluates every user as the server's does, listed or
// not; a sync form whose list is taken for a segment of conditions (as a
// client older than user lists would read it) is refused rather than
// matched by everyone.
func TestUserListSyncForm(t *testing.T) {
	var users []string
	for i := range 500 {
		users = append(users, fmt.Sprintf("listed-user-%03d", i))
	}
	server := listSnapshot(t, listFeature(""), users)
	doc := server.AppendSync(nil)
	if bytes.Contains(doc, []byte("listed-user-")) {
		t.Fatalf("the sync document holds a listed user's ID:\n%.400s", doc)
	}
	if want := ListUserHash("beta", "listed-user-007"); !bytes.Contains(doc, []byte(`"`+want+`"`)) || want != OverrideHash("beta", "", "listed-user-007") {
		t.Fatalf("the sync document lacks the hash %s of listed-user-007 (OverrideHash %s)", want, OverrideHash("beta", "", "listed-user-007"))
	}
	client, err := DecodeSync(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := client.SyncTag(); got != server.SyncTag() {
		t.Errorf("client's SyncTag = %s, want the server's %s", got, server.SyncTag())
	}
	on := 0
	for i := range 1000 {
		u := fmt.Sprintf("listed-user-%03d", i)
		want, _ := server.PeekContext("gate", u, nil)
		got, _ := client.PeekContext("gate", u, nil)
		if got.Bucket != want.Bucket || got.Reason != want.Reason || got.Rule != want.Rule {
			t.Fatalf("client serves %s %+v, server %+v", u, got, want)
		}
		if got.Bucket == "on" {
			on++
		}
	}
	if on != 500 {
		t.Errorf("the client serves %d users of 1,000 the list's bucket, want the 500 listed", on)
	}

	old := regexp.MustCompile(`"list":true,"users":\[[^\]]*\]`).ReplaceAll(doc, []byte(`"x":0`))
	if _, err := DecodeSync(old); err == nil || !strings.Contains(err.Error(), SyncListMarker) {
		t.Errorf("DecodeSync(a list read as conditions) = %v, want the feature left out for operator %s", err, SyncListMarker)
	}
}

// TestUserListDiff: a list's diff counts the users that enter and leave
// it exactly, each once.
func TestUserListDiff(t *testing.T) {
	l := NewUserList("beta", []string{"a", "b", "c"})
	if added, removed := l.Diff([]string{"b", "c", "d", "d", "e"}); added != 2 || removed != 1 {
		t.Errorf("Diff = +%d -%d, want +2 -1", added, removed)
	}
	next := l.Edit([]string{"x"}, []string{"a", "zzz"})
	if next.Len() != 3 || next.Has("a") || !next.Has("x") || !l.Has("a") {
		t.Errorf("Edit(+x -a -zzz) = %d users, a %v, x %v (the original still has a: %v)", next.Len(), next.Has("a"), next.Has("x"), l.Has("a"))
	}
}

// TestUserListEvaluationAllocatesNothing: testing a user against a list
// of 100,000 allocates nothing, listed or not.
func TestUserListEvaluationAllocatesNothing(t *testing.T) {
	snap := listSnapshot(t, listFeature(""), benchListUsers(MaxListUsers))
	if n := testing.AllocsPerRun(200, func() {
		_, _ = snap.Evaluate("gate", "user-17")
		_, _ = snap.Evaluate("gate", "nobody")
	}); n != 0 {
		t.Errorf("an evaluation against a list of %d allocates %v times, want 0", MaxListUsers, n)
	}
}

func benchListUsers(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user-%d", i)
	}
	return out
}

// The user-list benchmarks: one feature whose rule tests a list of 10 and
// of 100,000 users, beside their baseline BenchmarkMD5UserID. Both
// evaluate the same 512 unlisted users, interleaved with as many listed
// ones (the 10 over and over, or 512 of the 100,000), so that only the
// list's size differs. A list's size should not change the cost.
func benchmarkUserList(b *testing.B, size int) {
	listed := benchListUsers(size)
	snap := listSnapshot(b, listFeature(""), listed)
	users := make([]string, 1024)
	for i := range users {
		if i%2 == 0 {
			users[i] = listed[(i/2*7919)%size]
		} else {
			users[i] = fmt.Sprintf("nobody-%d", i)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := snap.Evaluate("gate", users[i%len(users)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUserList10(b *testing.B)     { benchmarkUserList(b, 10) }
func BenchmarkUserList100000(b *testing.B) { benchmarkUserList(b, MaxListUsers) }

// TestUserListExplained: an explained answer says whether the user (or
// the bucket_by attribute) is in the list, as the evaluation decided.
func TestUserListExplained(t *testing.T) {
	byUser := listSnapshot(t, listFeature(""), []string{"ann"})
	for user, want := range map[string]string{"ann": "in user list beta", "carol": "not in user list beta"} {
		x, err := byUser.Explain("gate", user, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(x.Rules) == 0 || len(x.Rules[0].Conditions) == 0 || x.Rules[0].Conditions[0].Why != want {
			t.Errorf("Explain(gate, %s) = %+v, want the first condition's why %q", user, x.Rules, want)
		}
	}
}
