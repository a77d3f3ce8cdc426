package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rollout/rollout/rollout/feature"
)

// With --attack, the tool measures instead what the costliest evaluations
// the limits of targeting allow do to the others: 4 closed-loop clients
// (an app's evaluate token) send POST /evaluate of a feature with the
// costliest rules an editor may write, with the costliest context, while
// one client times GET /evaluate of an ordinary feature; its p99 is
// compared with its p99 without the attack, in turns (without, with, with,
// without) within the same run.

// attackKey is the feature of the costliest rules.
const attackKey = "attack-00000"

// attackLoops is how many clients attack at once.
const attackLoops = 4

// attackPattern is an unanchored pattern that keeps as many threads of the
// matcher alive as it has instructions (about 480): against a string of
// letters without a digit, each byte runs all of them.
const attackPattern = `[a-z]{1,240}[0-9]`

// attackRules are the costliest rules within the limits: patterns up to
// feature.MaxFeaturePatternInsts, each against a string of
// feature.MaxMatchBytes that it scans whole and does not match; then, up
// to feature.MaxTargetingBytes of JSON, rules of conditions that each read
// feature.MaxListBytes of a list attribute and hold, but for the last,
// which does not, so that every condition runs.
func attackRules() ([]feature.Rule, error) {
	cond := func(attr, op string, v any) feature.Condition {
		b, _ := json.Marshal(v)
		return feature.Condition{Attribute: attr, Op: op, Value: b}
	}
	never := cond("plan", feature.OpEq, "never")
	var rules []feature.Rule
	for {
		r := feature.Rule{Name: fmt.Sprintf("re%d", len(rules)), Conditions: []feature.Condition{cond("email", feature.OpMatches, attackPattern), never},
			Serve: feature.Serve{Bucket: "A"}}
		f := feature.Feature{Key: attackKey, Enabled: true, Buckets: benchBuckets, Rules: append(rules, r)}
		if err := f.ValidateTargeting(); err != nil {
			if len(rules) == 0 {
				return nil, err
			}
			break
		}
		rules = append(rules, r)
	}
	for len(rules) < feature.MaxRules {
		r := feature.Rule{Name: fmt.Sprintf("list%d", len(rules)), Serve: feature.Serve{Bucket: "B"}}
		for range feature.MaxConditions - 1 {
			r.Conditions = append(r.Conditions, cond("tags", feature.OpContains, "zz"))
		}
		r.Conditions = append(r.Conditions, never)
		b, _ := json.Marshal(append(rules, r))
		if len(b) > feature.MaxTargetingBytes {
			break
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// attackContext is the costliest context for attackRules: the string the
// patterns scan whole, and a list of feature.MaxContextList entries of
// feature.MaxContextValueLen bytes whose entry that holds "zz" comes last
// within feature.MaxListBytes.
func attackContext() map[string]any {
	entry := strings.Repeat("x", feature.MaxContextValueLen)
	tags := make([]string, feature.MaxContextList)
	for i := range tags {
		tags[i] = entry
	}
	last := feature.MaxListBytes/feature.MaxContextValueLen - 1
	tags[last] = strings.Repeat("x", feature.MaxContextValueLen-2) + "zz"
	return map[string]any{"email": strings.Repeat("a", feature.MaxMatchBytes), "plan": "pro", "tags": tags}
}

// AttackRound is one turn of the attack measurement.
type AttackRound struct {
	Attacked bool  `json:"attacked"`
	Victim   Stats `json:"victim"`
	Attack   Stats `json:"attack"`
}

// Attack is the result of --attack.
type Attack struct {
	Rules        int           `json:"rules"`
	Conditions   int           `json:"conditions"`
	ContextBytes int           `json:"context_bytes"`
	Rounds       []AttackRound `json:"rounds"`
	// P99 of the victim, without and with the attack, over the rounds;
	// Ratio is with / without (the goal: within 2).
	P99Without float64 `json:"p99_without_ms"`
	P99With    float64 `json:"p99_with_ms"`
	Ratio      float64 `json:"p99_ratio"`
}

func runAttack(ctx context.Context, cfg config, stdout io.Writer, progress func(string, ...any)) error {
	dir, err := os.MkdirTemp("", "rollout-bench-attack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	progress("attack: starting rollout with %d features", cfg.features)
	s, err := startService(ctx, dir, cfg.features)
	if err != nil {
		return err
	}
	defer s.close()
	client := newClient(attackLoops + 1)
	rules, err := attackRules()
	if err != nil {
		return err
	}
	feature, _ := json.Marshal(map[string]any{"key": attackKey, "buckets": benchBuckets, "rules": rules})
	if err := doStatus(ctx, client, s.url, s.edit, request{method: http.MethodPost, target: "/api/features", body: feature}, http.StatusCreated); err != nil {
		return fmt.Errorf("create the attack's feature (as an editor): %w", err)
	}
	body, _ := json.Marshal(map[string]any{"user": "mallory", "features": []string{attackKey}, "context": attackContext()})
	attack := []request{{method: http.MethodPost, target: "/evaluate", body: body}}
	var victim []request
	for i := range 1000 {
		victim = append(victim, request{method: http.MethodGet, target: "/evaluate?feature=" + featureKey(i%cfg.features) + "&user=" + userID(i)})
	}
	res := Attack{Rules: len(rules), ContextBytes: len(body)}
	for _, r := range rules {
		res.Conditions += len(r.Conditions)
	}
	phase := func(attacked bool, d time.Duration) AttackRound {
		round := AttackRound{Attacked: attacked}
		var wg sync.WaitGroup
		var a sample
		if attacked {
			wg.Go(func() { a = drive(ctx, client, s.url, s.evaluate, attack, attackLoops, d) })
		}
		v := drive(ctx, client, s.url, s.evaluate, victim, 1, d)
		wg.Wait()
		round.Victim, round.Attack = summarize(v), summarize(a)
		return round
	}
	progress("attack: %d rules of %d conditions in all, a request of %d bytes; %d rounds of %v without and with %d attackers", res.Rules, res.Conditions, len(body), cfg.rounds, cfg.duration, attackLoops)
	phase(false, min(cfg.duration/5, time.Second))
	phase(true, min(cfg.duration/5, time.Second))
	for range cfg.rounds {
		for _, attacked := range []bool{false, true, true, false} {
			d := cfg.duration / 2
			r := phase(attacked, d)
			res.Rounds = append(res.Rounds, r)
			progress("attack: attacked %v: victim p99 %.3f ms (%d requests), attack p50 %.3f ms (%d requests, %d errors)", attacked, r.Victim.P99, r.Victim.Requests, r.Attack.P50, r.Attack.Requests, r.Attack.Errors)
		}
	}
	var p99w, p99a []float64
	for _, r := range res.Rounds {
		if r.Attacked {
			p99a = append(p99a, r.Victim.P99)
		} else {
			p99w = append(p99w, r.Victim.P99)
		}
	}
	res.P99Without, res.P99With = median(p99w), median(p99a)
	res.Ratio = ratio(res.P99With, res.P99Without)
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(stdout, "attack: %d rules, %d conditions; POST /evaluate of %d bytes from %d clients against GET /evaluate of other features from 1\n", res.Rules, res.Conditions, res.ContextBytes, attackLoops)
	for _, r := range res.Rounds {
		fmt.Fprintf(stdout, "  attacked %-5v victim p50 %7.3f ms p99 %7.3f ms (%6d requests)   attack p50 %8.3f ms p99 %8.3f ms (%5d requests, %d errors)\n",
			r.Attacked, r.Victim.P50, r.Victim.P99, r.Victim.Requests, r.Attack.P50, r.Attack.P99, r.Attack.Requests, r.Attack.Errors)
	}
	fmt.Fprintf(stdout, "victim p99, median of rounds: %.3f ms without, %.3f ms with: ratio %.2f (goal: within 2)\n", res.P99Without, res.P99With, res.Ratio)
	return nil
}
