package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
)

// testAuditActorContains: ActorContains finds the events whose actor
// contains the text, ignoring case, with % and _ taken as themselves.
func testAuditActorContains(t *testing.T, o Opened) {
	ctx := context.Background()
	now := time.Now().UTC()
	for i, actor := range []string{"ed, approved by carol", "Carol via sso", "ed", "x_y", "x%y", "xzy"} {
		if err := o.Store.CreateToken(ctx, auth.Token{ID: fmt.Sprint("t", i), Name: fmt.Sprint("t", i), Role: auth.RoleViewer,
			Hash: fmt.Sprint("h", i), CreatedAt: now, CreatedBy: actor}); err != nil {
			t.Fatal(err)
		}
	}
	for q, want := range map[string][]string{
		"carol":  {"Carol via sso", "ed, approved by carol"},
		"ED":     {"ed", "ed, approved by carol"},
		"_":      {"x_y"},
		"%":      {"x%y"},
		"nobody": nil,
	} {
		es, err := o.Store.AuditEvents(ctx, audit.Query{ActorContains: q})
		var got []string
		for _, e := range es {
			got = append(got, e.Actor)
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("ActorContains %q = %q, %v; want %q (newest first)", q, got, err, want)
		}
	}
}
