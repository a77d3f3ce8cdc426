package evaluation_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/api/evaluation"
	"github.com/rollout/rollout/api/internal/apitest"
	"github.com/rollout/rollout/rollout/feature"
)

// TestContextLimitsEveryRoute: a context over feature.MaxContextBytes, or
// with a list over feature.MaxContextList, is a 422 invalid on every
// evaluation route (OFREP's: its own 400 INVALID_CONTEXT), and a body over
// evaluation.MaxEvaluateBodyBytes a 413.
func TestContextLimitsEveryRoute(t *testing.T) {
	s := newRulesServer(t)
	// OFREP reads the context only for features that use it.
	s.Must(http.StatusOK, "PUT", "/api/features/checkout/rules", `{"rules":[{"name":"r","conditions":[{"attribute":"a","op":"eq","value":"x"}],"serve":{"bucket":"on"}}]}`)
	kb := strings.Repeat("x", feature.MaxContextValueLen)
	big := map[string]any{}
	q := url.Values{"feature": {"checkout"}, "user": {"u1"}}
	for i := range feature.MaxContextBytes/feature.MaxContextValueLen + 1 {
		big[fmt.Sprint("a", i)] = kb
		q.Set(fmt.Sprint("ctx.a", i), kb)
	}
	long := map[string]any{"groups": make([]string, feature.MaxContextList+1)}
	withKey := func(ctx map[string]any) map[string]any {
		out := map[string]any{"targetingKey": "u1"}
		for k, v := range ctx {
			out[k] = v
		}
		return out
	}
	const tooLarge = "the context is more than 8192 bytes"
	listTooLong := fmt.Sprintf("is a list of %d; at most %d", feature.MaxContextList+1, feature.MaxContextList)
	cases := []struct {
		name, method, path string
		body               any
		want               string
	}{
		{"GET", "GET", "/evaluate?" + q.Encode(), nil, tooLarge},
		{"POST", "POST", "/evaluate", map[string]any{"user": "u1", "context": big}, tooLarge},
		{"POST, odd shape", "POST", "/evaluate", map[string]any{"User": "u1", "context": big}, tooLarge},
		{"OFREP", "POST", "/ofrep/v1/evaluate/flags/checkout", map[string]any{"context": withKey(big)}, tooLarge},
		{"OFREP bulk", "POST", "/ofrep/v1/evaluate/flags", map[string]any{"context": withKey(big)}, tooLarge},
		{"POST list", "POST", "/evaluate", map[string]any{"user": "u1", "context": long}, listTooLong},
		{"OFREP list", "POST", "/ofrep/v1/evaluate/flags/checkout", map[string]any{"context": withKey(long)}, listTooLong},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.Do(tc.method, tc.path, tc.body)
			want := http.StatusUnprocessableEntity
			if strings.HasPrefix(tc.path, "/ofrep/") {
				want = http.StatusBadRequest
			}
			if r.Status != want || !strings.Contains(string(r.Body), tc.want) {
				t.Errorf("%s %s = %d %.300s, want %d saying %q", tc.method, tc.path, r.Status, r.Body, want, tc.want)
			}
			if strings.HasPrefix(tc.path, "/ofrep/") && !strings.Contains(string(r.Body), `"errorCode":"INVALID_CONTEXT"`) {
				t.Errorf("%s %s = %.300s, want INVALID_CONTEXT", tc.method, tc.path, r.Body)
			}
		})
	}
	// A context within the limits is evaluated.
	within := map[string]any{"a": "x"}
	for i := range feature.MaxContextBytes/feature.MaxContextValueLen - 1 {
		within[fmt.Sprint("b", i)] = kb
	}
	e := s.Must(http.StatusOK, "POST", "/evaluate", map[string]any{"user": "u1", "features": []string{"checkout"}, "context": within}).JSON(t)
	if r := e["results"].(map[string]any)["checkout"].(map[string]any); r["rule"] != "r" {
		t.Errorf("evaluation within the limits: %v, want rule r", r)
	}
	// Bodies: a list of 1,000 keys of 50 characters fits; 64 KiB more
	// does not.
	keys := make([]string, evaluation.MaxBulkFeatures)
	for i := range keys {
		keys[i] = fmt.Sprintf("%050d", i)
	}
	s.Must(http.StatusOK, "POST", "/evaluate", map[string]any{"user": "u1", "features": keys})
	pad := strings.Repeat(" ", evaluation.MaxEvaluateBodyBytes)
	for _, path := range []string{"/evaluate", "/ofrep/v1/evaluate/flags/checkout", "/ofrep/v1/evaluate/flags"} {
		if r := s.Do("POST", path, `{"context":{"targetingKey":"u1"}}`+pad); r.Status != http.StatusRequestEntityTooLarge {
			t.Errorf("POST %s of %d bytes = %d %.200s, want 413", path, len(pad), r.Status, r.Body)
		}
	}
}

// TestConditionChecksAPI: rules whose conditions, a segment's counted at
// each use, pass feature.MaxConditionChecks are refused with 400 naming
// the condition, on PUT rules and on a segment's change that would bring a
// feature past it; a document, with its 422 and path; and nothing
// changes.
func TestConditionChecksAPI(t *testing.T) {
	conds := func(n int, c string) string {
		return strings.TrimSuffix(strings.Repeat(c+",", n), ",")
	}
	pro := `{"attribute":"plan","op":"eq","value":"pro"}`
	in := `{"op":"in_segment","value":"staff"}`
	rules := func(n, per int, c string) string {
		var rs []string
		for i := range n {
			rs = append(rs, fmt.Sprintf(`{"name":"r%d","conditions":[%s],"serve":{"bucket":"on"}}`, i, conds(per, c)))
		}
		return "[" + strings.Join(rs, ",") + "]"
	}
	s := newRulesServer(t)
	s.Must(http.StatusCreated, "POST", "/api/segments", `{"key":"staff","description":"","conditions":[`+pro+`]}`)
	s.Create(feature.Feature{Key: "wide", Enabled: true, Salt: "wide", Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}})
	// 51 uses of a segment of 1 condition: within the limit, until the
	// segment has 20.
	s.Must(http.StatusOK, "PUT", "/api/features/wide/rules", `{"rules":`+rules(3, 17, in)+`}`)
	doc := func(rules, segment string) map[string]any {
		var d map[string]any
		if err := json.Unmarshal([]byte(`{"features":[{"key":"checkout","buckets":[{"name":"off","replicas":100},{"name":"on","replicas":100}],"rules":`+rules+`}],"segments":[`+segment+`]}`), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	const invalid = http.StatusUnprocessableEntity // bodies and documents alike
	cases := []struct {
		name, method, path string
		body               any
		status             int
		want               string
	}{
		{"rules", "PUT", "/api/features/checkout/rules", `{"rules":` + rules(51, 20, pro) + `}`, invalid, `rules[50].conditions[0]: rule "r50": the feature's conditions come to 1001 checks up to this condition`},
		{"segment update", "PUT", "/api/segments/staff", `{"description":"","conditions":[` + conds(20, pro) + `]}`, invalid, `segment "staff": feature "wide", which uses it, would pass the limits of its rules: rules[2].conditions[16]: rule "r2": the feature's conditions come to 1020 checks`},
		{"plan", "POST", "/api/plan", doc(rules(51, 20, pro), ``), invalid, `features[0].rules[50].conditions[0]: rule "r50": the feature's conditions come to 1001 checks`},
		{"plan with a segment", "POST", "/api/plan", doc(rules(3, 20, in), `{"key":"staff","conditions":[`+conds(20, pro)+`]}`), invalid, `features[0].rules[2].conditions[10]: rule "r2": the feature's conditions come to 1020 checks`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rev := s.Svc.Snapshot().Revision()
			r := s.Do(tc.method, tc.path, tc.body)
			if r.Status != tc.status || !strings.Contains(string(r.Body), jsonText(tc.want)) {
				t.Errorf("%s %s = %d %.400s, want %d saying %q", tc.method, tc.path, r.Status, r.Body, tc.status, tc.want)
			}
			if got := s.Svc.Snapshot().Revision(); got != rev {
				t.Errorf("revision %d after a refused change, want %d", got, rev)
			}
		})
	}
}

// TestCostlyEvaluationsRunApart: evaluations of a costly feature, or with
// a large body, run in the slots of costly evaluations: with every slot
// taken, one waits, then is refused with 503 and a Retry-After, while
// ordinary evaluations go on; once the slot is free, it is served.
func TestCostlyEvaluationsRunApart(t *testing.T) {
	s := apitest.New(t, "", api.Options{Costly: evaluation.CostlyLimits{Running: 1, Wait: 20 * time.Millisecond}})
	buckets := []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}
	s.Create(feature.Feature{Key: "plain", Enabled: true, Buckets: buckets})
	s.Create(feature.Feature{Key: "mail", Enabled: true, Buckets: buckets})
	s.Must(http.StatusOK, "PUT", "/api/features/mail/rules", `{"rules":[{"name":"mail","conditions":[{"attribute":"email","op":"matches","value":"[a-z0-9._%+-]{1,64}@[a-z0-9.-]{1,255}\\.[a-z]{2,63}"}],"serve":{"bucket":"on"}}]}`)
	if !s.Svc.Snapshot().Costly("mail") || s.Svc.Snapshot().Costly("plain") {
		t.Fatal("want mail costly (764 pattern instructions) and plain not")
	}
	entered, release := evaluation.HoldCostlySlots(t)
	held := make(chan int, 1)
	go func() {
		res, err := http.Get(s.URL + "/evaluate?feature=mail&user=u1&ctx.email=ann@example.com")
		if err != nil {
			held <- 0
			return
		}
		res.Body.Close()
		held <- res.StatusCode
	}()
	<-entered
	large := `{"user":"u1","features":["plain"],"context":{"pad":"` + strings.Repeat("p", feature.MaxContextValueLen) + `"}}` + strings.Repeat(" ", 16<<10)
	for _, tc := range []struct {
		name, method, path string
		body               any
		want               int
	}{
		{"GET of a costly feature", "GET", "/evaluate?feature=mail&user=u2&ctx.email=bob@example.com", nil, http.StatusServiceUnavailable},
		{"POST of a costly feature", "POST", "/evaluate", `{"user":"u2","features":["plain","mail"]}`, http.StatusServiceUnavailable},
		{"OFREP of a costly feature", "POST", "/ofrep/v1/evaluate/flags/mail", `{"context":{"targetingKey":"u2","email":"bob@example.com"}}`, http.StatusServiceUnavailable},
		{"OFREP bulk with a costly feature", "POST", "/ofrep/v1/evaluate/flags", `{"context":{"targetingKey":"u2"}}`, http.StatusServiceUnavailable},
		{"a large body", "POST", "/evaluate", large, http.StatusServiceUnavailable},
		{"a long query", "GET", "/evaluate?feature=plain&user=u2&ctx.pad=" + strings.Repeat("p", 17<<10), nil, http.StatusServiceUnavailable},
		{"GET of an ordinary feature", "GET", "/evaluate?feature=plain&user=u2", nil, http.StatusOK},
		{"POST of an ordinary feature", "POST", "/evaluate", `{"user":"u2","features":["plain"],"context":{"plan":"pro"}}`, http.StatusOK},
		{"OFREP of an ordinary feature", "POST", "/ofrep/v1/evaluate/flags/plain", `{"context":{"targetingKey":"u2"}}`, http.StatusOK},
	} {
		r := s.Do(tc.method, tc.path, tc.body)
		if r.Status != tc.want {
			t.Errorf("%s: %s %s = %d %.200s, want %d", tc.name, tc.method, tc.path, r.Status, r.Body, tc.want)
		}
		if tc.want == http.StatusServiceUnavailable && r.Header.Get("Retry-After") != "1" {
			t.Errorf("%s: Retry-After %q, want 1", tc.name, r.Header.Get("Retry-After"))
		}
	}
	release()
	if status := <-held; status != http.StatusOK {
		t.Errorf("the evaluation that held the slot = %d, want 200", status)
	}
	s.Must(http.StatusOK, "GET", "/evaluate?feature=mail&user=u2&ctx.email=bob@example.com", nil)
}
