package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/store/storetest"
)

// within runs op and returns its error, failing t if op has not returned
// after limit: a generous bound that only a hang exceeds.
func within(t *testing.T, limit time.Duration, what string, op func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("%s has not returned after %v: it hangs with the server", what, limit)
		return nil
	}
}

// TestHungServer: with the server's connection frozen (nothing forwarded,
// nothing closed), every operation gives up as unavailable after the
// store's timeout instead of waiting for the server; once it answers
// again, so does the store.
func TestHungServer(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	proxy, via := storetest.ProxyDSN(t, dsn)
	db := open(t, via)
	db.SetTimeout(time.Second)
	ctx := context.Background()
	f, v := testFeature("a")
	if err := db.CreateFeature(ctx, f, v); err != nil {
		t.Fatal(err)
	}
	g := f.Clone()
	g.Version, g.Description = 2, "changed"
	gv := rollout.Version{Version: 2, Actor: "test", Time: time.Now().UTC(), Config: g}

	proxy.Freeze()
	now := time.Now().UTC()
	ops := []struct {
		name string
		op   func() error
	}{
		{"UpdateFeature", func() error { return db.UpdateFeature(ctx, g, gv) }},
		{"Features", func() error { _, err := db.Features(ctx); return err }},
		{"Revision", func() error { _, err := db.Revision(ctx); return err }},
		{"Commits", func() error { _, err := db.Commits(ctx, 0, 10); return err }},
		{"ClaimIdempotency", func() error {
			_, _, err := db.ClaimIdempotency(ctx, idempotency.Record{Scope: "s", Key: "k", Fingerprint: "f", Attempt: "a", LeaseUntil: now, Expires: now}, now)
			return err
		}},
	}
	for _, o := range ops {
		err := within(t, time.Minute, o.name+" on a hung server", o.op)
		if code := feature.ErrorCode(err); code != feature.EUnavailable {
			t.Errorf("%s on a hung server = %v (code %q), want %q", o.name, err, code, feature.EUnavailable)
		}
		// It timed out, and says so (the driver tells of a closed
		// connection).
		if msg := feature.ErrorMessage(err); !strings.Contains(msg, "the database did not answer within 1s") {
			t.Errorf("%s on a hung server says %q, want that the database did not answer within 1s", o.name, msg)
		}
	}

	proxy.Thaw()
	if err := within(t, time.Minute, "UpdateFeature after the thaw", func() error { return db.UpdateFeature(ctx, g, gv) }); err != nil {
		t.Errorf("UpdateFeature after the server answers again = %v", err)
	}
}

// TestCommitAnswerLost: a change whose COMMIT reaches the server but whose
// answer never comes back fails as unavailable, yet is committed — and its
// idempotency key with it, done with the answer: a retry of the request
// with the key, on any instance, gets that answer and applies nothing.
func TestCommitAnswerLost(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	proxy, via := storetest.ProxyDSN(t, dsn)
	db, direct := open(t, via), open(t, dsn)
	db.SetTimeout(time.Second)
	ctx := context.Background()
	f, v := testFeature("a")
	if err := db.CreateFeature(ctx, f, v); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	svc, err := rollout.NewService(ctx, direct, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	claim, first, err := svc.ClaimIdempotency(ctx, "tok", "key-1", "fingerprint")
	if err != nil || claim == nil {
		t.Fatalf("ClaimIdempotency() = %v, %q, %v; want a claim", claim, first, err)
	}
	g := f.Clone()
	g.Version, g.Description = 2, "changed"
	settles := &idempotency.Settlement{Claim: *claim, Answer: []byte("the first answer"), Expires: now.Add(idempotency.Memory)}

	proxy.HoldNextCommitAnswer()
	err = within(t, time.Minute, "UpdateFeature whose commit answer is lost", func() error {
		return db.UpdateFeature(ctx, g, rollout.Version{Version: 2, Actor: "test", Time: now, Config: g, Settles: settles})
	})
	if code := feature.ErrorCode(err); code != feature.EUnavailable {
		t.Fatalf("UpdateFeature(commit answer lost) = %v (code %q), want %q", err, code, feature.EUnavailable)
	}
	proxy.Thaw()

	got, err := direct.Feature(ctx, "a")
	if err != nil || got.Version != 2 {
		t.Fatalf("Feature() after the lost answer = version %d, %v; want the change committed: version 2", got.Version, err)
	}
	again, first, err := svc.ClaimIdempotency(ctx, "tok", "key-1", "fingerprint")
	if err != nil || again != nil || string(first) != "the first answer" {
		t.Fatalf("retry's ClaimIdempotency() = %v, %q, %v; want no claim and the first answer", again, first, err)
	}
	vs, err := direct.Versions(ctx, "a", 0, 0)
	if err != nil || len(vs) != 2 {
		t.Errorf("Versions() = %d versions, %v; want 2: created, changed once", len(vs), err)
	}
}
