package provider_test

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-feature/go-sdk/openfeature"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/api/client/provider"
	"github.com/rollout/rollout/api/clienttest/internal/testserver"
	"github.com/rollout/rollout/api/clienttest/openfeaturesuite"
	"github.com/rollout/rollout/rollout/feature"
)

// OpenFeature's evaluation features (testdata/openfeature, see SOURCE.md
// there), run through the provider over a client of a real server whose
// features are the test bed's flags translated to rollout's by
// openfeaturesuite, whose steps the scenarios run.

const conformanceDir = "testdata/openfeature"

// needsDouble lists the scenarios that need a provider which is not ready,
// in error or fatal: a test double of the provider's state, which a real
// provider over a real server cannot be made to be. They are skipped.
var needsDouble = map[string]string{
	"a not ready provider": "needs a test double: a provider that stays NOT_READY (rollout's is ready once its client has a snapshot)",
	"a fatal provider":     "needs a test double: a provider in FATAL state (rollout's provider has no fatal error)",
	"a error provider":     "needs a test double: a provider in ERROR state (rollout's provider reports STALE, not ERROR, when the server is away)",
}

// cannotPass lists the scenarios rollout cannot pass, by the text of the
// step that shows it, and why. They run, and must fail at that step: one
// that passes is an error, so that the list stays true.
var cannotPass = map[string]string{
	`the reason should be "CACHED"`:        "rollout's provider evaluates every call from its synced copy: it has no cache of answers, so no reason CACHED",
	`the resolved metadata should contain`: "rollout's features carry no flag metadata of their own (string, integer, float, boolean entries): the provider's metadata is the feature's version",
}

// testbedFeatures returns the features the scenarios evaluate.
func testbedFeatures(t testing.TB) []feature.Feature {
	t.Helper()
	fs, err := openfeaturesuite.Features(conformanceDir)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// conformanceEnv is a server with the test bed's features, a client and the
// provider in the SDK under a domain of its own.
type conformanceEnv struct {
	server *testserver.Server
	client *client.Client
	of     *openfeature.Client
}

func newConformanceEnv(t *testing.T, domain string) *conformanceEnv {
	t.Helper()
	s := testserver.Start(t)
	for _, f := range testbedFeatures(t) {
		s.Create(t, f)
	}
	c := newClientOf(t, s)
	if err := openfeature.SetNamedProviderAndWait(domain, provider.New(c)); err != nil {
		t.Fatal(err)
	}
	return &conformanceEnv{server: s, client: c, of: openfeature.NewClient(domain)}
}

// TestOpenFeatureConformance runs every scenario of evaluation.feature and
// evaluation_v2.feature.
func TestOpenFeatureConformance(t *testing.T) {
	env := newConformanceEnv(t, "conformance")
	// Rules count only once rollout evaluates them for the in-app client:
	// until then, the scenarios of flags with rules are skipped.
	ruled := map[string]bool{}
	for _, f := range testbedFeatures(t) {
		if len(f.Rules) > 0 {
			ruled[f.Key] = true
		}
	}
	synced, _ := env.client.Snapshot().Feature("complex-targeted")
	rulesReach := len(synced.Rules) > 0

	var passed, skipped, cannot []string
	var mu sync.Mutex
	for _, file := range []string{"evaluation.feature", "evaluation_v2.feature"} {
		scenarios, err := parseGherkin(conformanceDir + "/" + file)
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range scenarios {
			name := file + ":" + strconv.Itoa(sc.Line) + " " + sc.Name
			t.Run(name, func(t *testing.T) {
				record := func(list *[]string) {
					mu.Lock()
					defer mu.Unlock()
					*list = append(*list, name)
				}
				for _, st := range sc.Steps {
					if why, ok := needsDouble[st.Text]; ok {
						record(&skipped)
						t.Skip(why)
					}
					for key := range ruled {
						if !rulesReach && strings.Contains(st.Text, `"`+key+`"`) {
							record(&skipped)
							t.Skipf("flag %s has rules, which rollout does not evaluate in the in-app client yet", key)
						}
					}
				}
				w := &world{Scenario: &openfeaturesuite.Scenario{Client: env.of}, t: t, env: env}
				failedAt, err := w.run(sc.Steps)
				expected := ""
				for _, st := range sc.Steps {
					if why, ok := cannotPass[st.Text]; ok {
						expected = st.Text
						if err == nil {
							t.Errorf("passes, though listed as one rollout cannot pass (%s): take it off the list", why)
						} else if failedAt != st.Text {
							t.Errorf("fails at %q (%v), before the step that rollout cannot pass, %q", failedAt, err, st.Text)
						} else {
							record(&cannot)
							t.Skipf("cannot pass: %s (fails as it must: %v)", why, err)
						}
					}
				}
				if expected == "" && err != nil {
					t.Errorf("step %q: %v", failedAt, err)
				}
				if !t.Failed() {
					record(&passed)
				}
			})
		}
	}
	t.Logf("OpenFeature conformance: %d scenarios passed, %d skipped (test doubles, or rules not yet evaluated), %d cannot pass",
		len(passed), len(skipped), len(cannot))
}

// world is the state of one scenario: the suite's, and the environment its
// provider runs in.
type world struct {
	*openfeaturesuite.Scenario
	t   *testing.T
	env *conformanceEnv
}

// steps returns the step definitions: the suite's, and a stale provider's.
func (w *world) steps() []openfeaturesuite.Step {
	stale := openfeaturesuite.Step{Pattern: `a stale provider`, Run: func([]string, [][]string) error {
		// A server of its own, stopped: the client cannot reach it.
		w.env = newConformanceEnv(w.t, "conformance-stale-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		w.Client = w.env.of
		w.env.server.Stop()
		deadline := time.Now().Add(30 * time.Second)
		for w.Client.State() != openfeature.StaleState {
			if time.Now().After(deadline) {
				return fmt.Errorf("provider state %s 30 s after its server stopped, want STALE", w.Client.State())
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}}
	return append([]openfeaturesuite.Step{stale}, w.Scenario.Steps()...)
}

// run runs the steps in order, up to the first that fails: it returns that
// step's text and error.
func (w *world) run(sts []gherkinStep) (string, error) {
	defs := w.steps()
	res := make([]*regexp.Regexp, len(defs))
	for i, d := range defs {
		res[i] = regexp.MustCompile("^" + d.Pattern + "$")
	}
	for _, st := range sts {
		var def *openfeaturesuite.Step
		var args []string
		for i, re := range res {
			if m := re.FindStringSubmatch(st.Text); m != nil {
				def, args = &defs[i], m[1:]
				break
			}
		}
		if def == nil {
			return st.Text, errors.New("no such step")
		}
		if err := def.Run(args, st.Table); err != nil {
			return st.Text, err
		}
	}
	return "", nil
}
