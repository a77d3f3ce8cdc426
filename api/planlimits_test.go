package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// planBody is a plan request for on/off at 10 % / 90 %.
var planBody = map[string]any{"targets": map[string]float64{"on": 0.1, "off": 0.9}}

// postPlan sends a plan request for dark-mode with ctx, from any goroutine.
func postPlan(ctx context.Context, url string) (int, []byte, error) {
	data, _ := json.Marshal(planBody)
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/api/features/dark-mode/plan", bytes.NewReader(data))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, body, err
}

// cutAnswer is what a plan's answer says of its search.
type cutAnswer struct {
	Buckets   []feature.Bucket `json:"buckets"`
	CutShort  bool             `json:"cut_short"`
	CutReason string           `json:"cut_reason"`
	Steps     int64            `json:"steps"`
}

func decodeCut(t *testing.T, body []byte) cutAnswer {
	t.Helper()
	var a cutAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("plan answer %s: %v", body, err)
	}
	points := 0
	for _, b := range a.Buckets {
		points += b.Replicas
		if b.Replicas < 1 || b.Replicas > feature.MaxReplicas {
			t.Errorf("planned bucket %s has %d replicas", b.Name, b.Replicas)
		}
	}
	if len(a.Buckets) == 0 || points > feature.MaxPoints {
		t.Errorf("plan %v: want buckets within the limits", a.Buckets)
	}
	return a
}

// TestPlansAtOnce: while as many plans run as the server runs at once
// (half of GOMAXPROCS by default, or as set), another plan and a feature
// created with targets are refused at once with 429, a Retry-After and a
// JSON error, and change nothing; evaluation is answered meanwhile; once
// the plans end, plans are answered again.
func TestPlansAtOnce(t *testing.T) {
	for _, running := range []int{0, 2} {
		t.Run(fmt.Sprintf("running %d", running), func(t *testing.T) {
			s := newServer(t, "", api.Options{Plans: api.PlanLimits{Running: running}})
			s.seed()
			want := running
			if want == 0 {
				want = max(2, runtime.GOMAXPROCS(0)/2)
			}
			entered, freed := make(chan struct{}, want+1), make(chan struct{}, want+1)
			release := make(chan struct{})
			api.SetPlanHook(t, func(context.Context) func() {
				entered <- struct{}{}
				<-release
				return func() { freed <- struct{}{} }
			})
			var wg sync.WaitGroup
			answers := make(chan string, want)
			for range want {
				wg.Go(func() {
					status, body, err := postPlan(context.Background(), s.URL)
					answers <- fmt.Sprintf("%d %v %.100s", status, err, body)
				})
			}
			t.Cleanup(wg.Wait)
			for range want {
				<-entered
			}

			r := s.do("POST", "/api/features/dark-mode/plan", planBody)
			if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" || !strings.Contains(string(r.body), `"code":"too_many_plans"`) {
				t.Errorf("plan beyond %d running = %d (Retry-After %q) %s, want 429 too_many_plans with Retry-After 1", want, r.status, r.header.Get("Retry-After"), r.body)
			}
			r = s.do("POST", "/api/features", map[string]any{"key": "split", "targets": map[string]float64{"A": 0.5, "B": 0.5}})
			if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
				t.Errorf("create with targets beyond %d running = %d %s, want 429", want, r.status, r.body)
			}
			if n := s.versions("split"); n != 0 {
				t.Errorf("refused create stored %d versions", n)
			}
			s.must(200, "GET", "/evaluate?feature=dark-mode&user=u1", nil)

			close(release)
			for range want {
				if a := <-answers; !strings.HasPrefix(a, "200 <nil>") {
					t.Errorf("held plan = %s, want 200", a)
				}
				<-freed
			}
			if r := s.do("POST", "/api/features/dark-mode/plan", planBody); r.status != 200 || decodeCut(t, r.body).CutShort {
				t.Errorf("plan after the others ended = %d %s, want 200, whole", r.status, r.body)
			}
			<-freed
			s.must(201, "POST", "/api/features", map[string]any{"key": "split", "targets": map[string]float64{"A": 0.5, "B": 0.5}})
		})
	}
}

// TestPlanClientGone: the search's context ends when the client hangs up,
// and the plan's slot is free again after.
func TestPlanClientGone(t *testing.T) {
	s := newServer(t, "", api.Options{Plans: api.PlanLimits{Running: 1, Timeout: time.Hour}})
	s.seed()
	entered, searched, freed := make(chan struct{}, 1), make(chan error, 1), make(chan struct{}, 2)
	api.SetPlanHook(t, func(ctx context.Context) func() {
		entered <- struct{}{}
		<-ctx.Done()
		searched <- context.Cause(ctx)
		return func() { freed <- struct{}{} }
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := postPlan(ctx, s.URL)
		done <- err
	}()
	<-entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("client's plan = %v, want canceled", err)
	}
	if err := <-searched; !errors.Is(err, context.Canceled) {
		t.Errorf("the search's context ended with %v, want canceled with its client", err)
	}
	<-freed

	api.SetPlanHook(t, func(context.Context) func() { return func() { freed <- struct{}{} } })
	if r := s.do("POST", "/api/features/dark-mode/plan", planBody); r.status != 200 {
		t.Errorf("plan after a client left = %d %s, want 200: its slot freed", r.status, r.body)
	}
}

// TestPlanDeadline: a plan whose deadline passes answers 200 with the best
// plan found, cut short by its deadline.
func TestPlanDeadline(t *testing.T) {
	s := newServer(t, "", api.Options{Plans: api.PlanLimits{Timeout: time.Millisecond}})
	s.seed()
	api.SetPlanHook(t, func(ctx context.Context) func() {
		<-ctx.Done() // the plan's deadline
		return nil
	})
	r := s.must(200, "POST", "/api/features/dark-mode/plan", planBody)
	if a := decodeCut(t, r.body); !a.CutShort || a.CutReason != plan.CutDeadline {
		t.Errorf("plan past its deadline = %s, want cut short by the deadline", r.body)
	}
	if n := s.versions("dark-mode"); n != 1 {
		t.Errorf("plan stored something: %d versions", n)
	}
}

// TestPlanBudgetAnswer: the plan of a hundred buckets, at the
// finest tolerance, answers 200 with a valid plan cut short by its budget.
func TestPlanBudgetAnswer(t *testing.T) {
	const budget = 200_000 // rollout's tests plan it with the default budget
	s := newServer(t, "", api.Options{Plans: api.PlanLimits{Budget: budget, Timeout: time.Hour}})
	var buckets []map[string]any
	targets := map[string]float64{}
	for i := range 100 {
		name := fmt.Sprintf("b%02d", i)
		buckets = append(buckets, map[string]any{"name": name, "replicas": 100})
		targets[name] = float64(i+1) / 5050
	}
	s.must(201, "POST", "/api/features", map[string]any{"key": "wide", "buckets": buckets})
	r := s.must(200, "POST", "/api/features/wide/plan", map[string]any{"targets": targets, "tolerance": plan.MinTolerance})
	a := decodeCut(t, r.body)
	if !a.CutShort || a.CutReason != plan.CutBudget || a.Steps < budget/2 || a.Steps > budget+4*feature.MaxReplicas {
		t.Errorf("plan of 100 buckets: cut short %v (%q) after %d steps, want cut by its budget of %d", a.CutShort, a.CutReason, a.Steps, budget)
	}
	if n := s.versions("wide"); n != 1 {
		t.Errorf("plan stored something: %d versions", n)
	}
}

// TestPlanAbsurdTolerances: tolerances finer than one user in a million or
// of 1 and more are refused with 422, in plans and in features created
// with targets, and so are more targets than a feature has buckets; the
// answers are JSON errors and nothing changes.
func TestPlanAbsurdTolerances(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	many := map[string]float64{}
	for i := range feature.MaxBuckets + 1 {
		many[fmt.Sprintf("b%03d", i)] = 1.0 / float64(feature.MaxBuckets+1)
	}
	for _, tc := range []struct {
		name, path string
		body       any
		status     int
		want       string
	}{
		{"plan: 1e-9", "/api/features/dark-mode/plan", map[string]any{"targets": planBody["targets"], "tolerance": 1e-9}, 422, "tolerance 1e-09 is out of range"},
		{"plan: 9e-7", "/api/features/dark-mode/plan", map[string]any{"targets": planBody["targets"], "tolerance": 9e-7}, 422, "out of range"},
		{"plan: 1", "/api/features/dark-mode/plan", map[string]any{"targets": planBody["targets"], "tolerance": 1}, 422, "tolerance 1 is out of range"},
		{"plan: 2", "/api/features/dark-mode/plan", map[string]any{"targets": planBody["targets"], "tolerance": 2}, 422, "out of range"},
		{"plan: negative", "/api/features/dark-mode/plan", map[string]any{"targets": planBody["targets"], "tolerance": -0.01}, 422, "out of range"},
		{"plan: too large", "/api/features/dark-mode/plan", `{"targets":{"on":0.1,"off":0.9},"tolerance":1e999}`, 400, "tolerance"},
		{"plan: too many targets", "/api/features/dark-mode/plan", map[string]any{"targets": many}, 422, "at most 100"},
		{"create: 1e-9", "/api/features", map[string]any{"key": "x", "targets": map[string]float64{"A": 0.5, "B": 0.5}, "tolerance": 1e-9}, 422, "out of range"},
		{"create: 1", "/api/features", map[string]any{"key": "x", "targets": map[string]float64{"A": 0.5, "B": 0.5}, "tolerance": 1}, 422, "out of range"},
		{"create: too many targets", "/api/features", map[string]any{"key": "x", "targets": many}, 422, "at most 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do("POST", tc.path, tc.body)
			if r.status != tc.status || !strings.Contains(string(r.body), tc.want) {
				t.Errorf("POST %s = %d %s, want %d with %q", tc.path, r.status, r.body, tc.status, tc.want)
			}
			if e, _ := r.json(t)["error"].(map[string]any); e == nil || e["message"] == "" {
				t.Errorf("answer %s has no error message", r.body)
			}
		})
	}
	if n := s.versions("dark-mode"); n != 1 {
		t.Errorf("dark-mode has %d versions after refusals, want 1", n)
	}
	if n := s.versions("x"); n != 0 {
		t.Errorf("feature x was created")
	}
	for _, tol := range []float64{plan.MinTolerance, 1e-5, 0.0005} {
		r := s.must(200, "POST", "/api/features/dark-mode/plan", map[string]any{"targets": planBody["targets"], "tolerance": tol})
		decodeCut(t, r.body)
	}
}
