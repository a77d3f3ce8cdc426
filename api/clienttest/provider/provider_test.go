package provider_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-feature/go-sdk/openfeature"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/api/client/provider"
	"github.com/rollout/rollout/api/clienttest/internal/testserver"
	"github.com/rollout/rollout/rollout/feature"
)

func raw(v string) json.RawMessage { return json.RawMessage(v) }

func testFeature(key string, enabled bool, fallback string, values ...string) feature.Feature {
	f := feature.Feature{Key: key, Enabled: enabled, Salt: key, Fallback: fallback}
	for i, v := range values {
		f.Buckets = append(f.Buckets, feature.Bucket{Name: string(rune('A' + i)), Replicas: 100, Value: raw(v)})
	}
	return f
}

// start runs a server with a feature of every value type, a client over it
// and the provider in the OpenFeature SDK; it returns the SDK's client and
// a channel of the provider's events.
func start(t testing.TB) (*testserver.Server, *client.Client, *openfeature.Client, chan openfeature.EventDetails) {
	t.Helper()
	s := testserver.Start(t)
	for _, f := range []feature.Feature{
		testFeature("flag-bool", true, "", `true`, `false`),
		testFeature("flag-string", true, "", `"red"`, `"blue"`),
		testFeature("flag-int", true, "", `10`, `20`),
		testFeature("flag-float", true, "", `0.25`, `1.5`),
		testFeature("flag-object", true, "", `{"color":"red","size":3}`, `[1,2]`),
		testFeature("flag-off", false, "", `true`, `false`),
		testFeature("flag-fallback", false, "B", `true`, `false`),
	} {
		s.Create(t, f)
	}
	over := testFeature("flag-override", true, "", `"ring"`, `"vip"`)
	over.Overrides = map[string]string{"vip-user": "B"}
	s.Create(t, over)

	c, err := client.New(context.Background(), client.Config{URL: s.URL, PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	events := make(chan openfeature.EventDetails, 100)
	handler := func(d openfeature.EventDetails) { events <- d }
	for _, typ := range []openfeature.EventType{openfeature.ProviderConfigChange, openfeature.ProviderStale, openfeature.ProviderReady} {
		openfeature.AddHandler(typ, &handler)
		t.Cleanup(func() { openfeature.RemoveHandler(typ, &handler) })
	}
	if err := openfeature.SetProviderAndWait(provider.New(c)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(openfeature.Shutdown)
	return s, c, openfeature.NewClient("test"), events
}

// TestEvaluationThroughTheSDK: the SDK drives the provider for every type,
// with the variant, reason and version of the client's evaluation, the
// code's default for a switched-off feature without fallback, and
// TYPE_MISMATCH for a value of another type.
func TestEvaluationThroughTheSDK(t *testing.T) {
	_, c, of, _ := start(t)
	ctx := context.Background()
	for _, user := range []string{"u1", "u2", "u3", "u4", "u5", "vip-user"} {
		ec := openfeature.NewEvaluationContext(user, map[string]any{"plan": "pro"})
		want := func(key string) feature.Evaluation {
			e, _ := c.Snapshot().Peek(key, user)
			return e
		}
		check := func(key string, got openfeature.ResolutionDetail, err error, wantReason openfeature.Reason) {
			t.Helper()
			e := want(key)
			if err != nil || got.Variant != e.Bucket || got.Reason != wantReason || got.FlagMetadata["version"] != e.Version {
				t.Errorf("%s for %s: %+v, %v; want variant %q, reason %s, version %d", key, user, got, err, e.Bucket, wantReason, e.Version)
			}
		}
		b, err := of.BooleanValueDetails(ctx, "flag-bool", false, ec)
		check("flag-bool", b.ResolutionDetail, err, openfeature.SplitReason)
		if b.Value != (want("flag-bool").Bucket == "A") {
			t.Errorf("flag-bool for %s = %v, want bucket %s's value", user, b.Value, want("flag-bool").Bucket)
		}
		s, err := of.StringValueDetails(ctx, "flag-string", "none", ec)
		check("flag-string", s.ResolutionDetail, err, openfeature.SplitReason)
		if wantS := map[string]string{"A": "red", "B": "blue"}[want("flag-string").Bucket]; s.Value != wantS {
			t.Errorf("flag-string for %s = %q, want %q", user, s.Value, wantS)
		}
		i, err := of.IntValueDetails(ctx, "flag-int", -1, ec)
		check("flag-int", i.ResolutionDetail, err, openfeature.SplitReason)
		if wantI := map[string]int64{"A": 10, "B": 20}[want("flag-int").Bucket]; i.Value != wantI {
			t.Errorf("flag-int for %s = %d, want %d", user, i.Value, wantI)
		}
		f, err := of.FloatValueDetails(ctx, "flag-float", -1, ec)
		check("flag-float", f.ResolutionDetail, err, openfeature.SplitReason)
		if wantF := map[string]float64{"A": 0.25, "B": 1.5}[want("flag-float").Bucket]; f.Value != wantF {
			t.Errorf("flag-float for %s = %v, want %v", user, f.Value, wantF)
		}
		o, err := of.ObjectValueDetails(ctx, "flag-object", nil, ec)
		check("flag-object", o.ResolutionDetail, err, openfeature.SplitReason)
		wantO := map[string]any{"A": map[string]any{"color": "red", "size": 3.0}, "B": []any{1.0, 2.0}}[want("flag-object").Bucket]
		if !reflect.DeepEqual(o.Value, wantO) {
			t.Errorf("flag-object for %s = %v, want %v", user, o.Value, wantO)
		}
		// An int flag read as a float is a number all the same.
		if fl, err := of.FloatValue(ctx, "flag-int", -1, ec); err != nil || fl != float64(i.Value) {
			t.Errorf("flag-int as a float for %s = %v, %v; want %d", user, fl, err, i.Value)
		}

		// Switched off: the code's default, or the fallback's value.
		off, err := of.BooleanValueDetails(ctx, "flag-off", true, ec)
		if err != nil || !off.Value || off.Reason != openfeature.DisabledReason || off.Variant != "" {
			t.Errorf("flag-off for %s = %+v, %v; want the default true, DISABLED, no variant", user, off, err)
		}
		fb, err := of.BooleanValueDetails(ctx, "flag-fallback", true, ec)
		if err != nil || fb.Value || fb.Reason != openfeature.DisabledReason || fb.Variant != "B" {
			t.Errorf("flag-fallback for %s = %+v, %v; want false from B, DISABLED", user, fb, err)
		}
		ov, err := of.StringValueDetails(ctx, "flag-override", "", ec)
		wantReason := openfeature.SplitReason
		if user == "vip-user" {
			wantReason = openfeature.TargetingMatchReason
			if ov.Value != "vip" {
				t.Errorf("flag-override for vip-user = %q, want vip", ov.Value)
			}
		}
		check("flag-override", ov.ResolutionDetail, err, wantReason)
	}

	ec := openfeature.NewEvaluationContext("u1", nil)
	for _, tt := range []struct {
		name string
		eval func() (openfeature.ResolutionDetail, error)
		code openfeature.ErrorCode
	}{
		{"string as bool", func() (openfeature.ResolutionDetail, error) {
			d, err := of.BooleanValueDetails(ctx, "flag-string", true, ec)
			return d.ResolutionDetail, err
		}, openfeature.TypeMismatchCode},
		{"bool as string", func() (openfeature.ResolutionDetail, error) {
			d, err := of.StringValueDetails(ctx, "flag-bool", "x", ec)
			return d.ResolutionDetail, err
		}, openfeature.TypeMismatchCode},
		{"float as int", func() (openfeature.ResolutionDetail, error) {
			d, err := of.IntValueDetails(ctx, "flag-float", 1, ec)
			return d.ResolutionDetail, err
		}, openfeature.TypeMismatchCode},
		{"string as float", func() (openfeature.ResolutionDetail, error) {
			d, err := of.FloatValueDetails(ctx, "flag-string", 1, ec)
			return d.ResolutionDetail, err
		}, openfeature.TypeMismatchCode},
		{"number as object", func() (openfeature.ResolutionDetail, error) {
			d, err := of.ObjectValueDetails(ctx, "flag-int", nil, ec)
			return d.ResolutionDetail, err
		}, openfeature.TypeMismatchCode},
		{"missing flag", func() (openfeature.ResolutionDetail, error) {
			d, err := of.BooleanValueDetails(ctx, "missing", true, ec)
			return d.ResolutionDetail, err
		}, openfeature.FlagNotFoundCode},
		{"no targeting key", func() (openfeature.ResolutionDetail, error) {
			d, err := of.BooleanValueDetails(ctx, "flag-bool", true, openfeature.NewTargetlessEvaluationContext(nil))
			return d.ResolutionDetail, err
		}, openfeature.TargetingKeyMissingCode},
		{"targeting key too long", func() (openfeature.ResolutionDetail, error) {
			d, err := of.BooleanValueDetails(ctx, "flag-bool", true, openfeature.NewEvaluationContext(strings.Repeat("x", 300), nil))
			return d.ResolutionDetail, err
		}, openfeature.InvalidContextCode},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := tt.eval()
			if err == nil || d.ErrorCode != tt.code || d.Reason != openfeature.ErrorReason {
				t.Errorf("details %+v, %v; want %s and reason ERROR", d, err, tt.code)
			}
		})
	}
}

func waitFor(t *testing.T, events <-chan openfeature.EventDetails, want string, within time.Duration) openfeature.EventDetails {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case d := <-events:
			if strings.Contains(d.Message, want) {
				return d
			}
		case <-deadline:
			t.Fatalf("no event %q within %v", want, within)
		}
	}
}

// TestProviderEvents: a change is PROVIDER_CONFIGURATION_CHANGED with the
// flag's key; the server stopped, the provider goes STALE (and keeps
// answering); restarted, READY again.
func TestProviderEvents(t *testing.T) {
	s, _, of, events := start(t)
	ctx := context.Background()
	req, _ := http.NewRequest("PATCH", s.URL+"/api/features/flag-int", strings.NewReader(`{"enabled":false}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("PATCH: %v, %v", res, err)
	}
	res.Body.Close()
	d := waitFor(t, events, "features changed", 5*time.Second)
	if !slices.Equal(d.FlagChanges, []string{"flag-int"}) {
		t.Errorf("PROVIDER_CONFIGURATION_CHANGED flag changes = %q, want [flag-int]", d.FlagChanges)
	}

	ec := openfeature.NewEvaluationContext("u1", nil)
	before, _ := of.StringValue(ctx, "flag-string", "none", ec)
	s.Stop()
	waitFor(t, events, "cannot be reached", 5*time.Second)
	if got := of.State(); got != openfeature.StaleState {
		t.Errorf("state with the server stopped = %s, want STALE", got)
	}
	if got, err := of.StringValue(ctx, "flag-string", "none", ec); err != nil || got != before {
		t.Errorf("flag-string with the server stopped = %q, %v; want %q", got, err, before)
	}
	testserver.StartAt(t, s.DBPath, s.Addr)
	waitFor(t, events, "answers again", 5*time.Second)
	if got := of.State(); got != openfeature.ReadyState {
		t.Errorf("state with the server back = %s, want READY", got)
	}
}

var sinkB bool

// BenchmarkProvider: one boolean evaluation through the OpenFeature SDK,
// beside the client's own Evaluate of the same flag.
func BenchmarkProvider(b *testing.B) {
	_, c, of, _ := start(b)
	ctx := context.Background()
	ec := openfeature.NewEvaluationContext("user-00001234", nil)
	b.Run("client", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e, _ := c.Evaluate("flag-bool", "user-00001234")
			sinkB = e.Bucket == "A"
		}
	})
	b.Run("openfeature", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkB, _ = of.BooleanValue(ctx, "flag-bool", false, ec)
		}
	})
	// With 6 attributes, which the provider passes on to the rules.
	ec6 := openfeature.NewEvaluationContext("user-00001234", map[string]any{
		"email": "someone@elsewhere.org", "beta": false, "plan": "pro", "country": "FR", "version": "4.1.9", "age": 17})
	b.Run("openfeature-6-attributes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkB, _ = of.BooleanValue(ctx, "flag-bool", false, ec6)
		}
	})
}
