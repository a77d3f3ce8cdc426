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
// one client times GET /evaluate of ordinary features. Its p99 is compared
// with its p99 alone and with its p99 beside 4 clients that send ordinary
// POST /evaluate (one feature without rules, a context of 2 attributes),
// in turns (alone, attack, ordinary, ordinary, attack, alone) within the
// same run: on a machine of few cores, 4 closed loops of any evaluation
// take its cores, so the second comparison says what the attack's cost
// adds. The server runs the attack's evaluations in its slots of costly
// evaluations; one refused with 503 counts as an error of the attack.

// attackKey is the feature of the costliest rules; attackSegment the
// segment its rules use.
const (
	attackKey     = "attack-00000"
	attackSegment = "attack-list"
)

// attackLoops is how many clients attack at once.
const attackLoops = 4

// attackPattern is an unanchored pattern that keeps as many threads of the
// matcher alive as it has instructions (about 480): against a string of
// letters without a digit, each byte runs all of them.
const attackPattern = `[a-z]{1,240}[0-9]`

// attackEntry is the i-th string of the attack's list: attackEntryBytes
// bytes that share all but their last 4 with every other, so that each
// comparison of a binary search reads them whole.
func attackEntry(i int) string {
	return strings.Repeat("x", attackEntryBytes-4) + fmt.Sprintf("%04d", i)
}

// attackEntryBytes is the length of the attack's list entries: a list of
// feature.MaxContextList of them fills feature.MaxListBytes, which a
// condition reads of a list.
const attackEntryBytes = feature.MaxListBytes / feature.MaxContextList

// attackSegmentConditions returns the segment the attack's rules use: one
// "in" condition on the list attribute "tags" whose list of entries (as
// many as feature.MaxTargetingBytes of JSON allows) holds only the last
// entry of attackContext's list, so that a test of it runs a binary search
// of the list for each of the context's entries, and holds.
func attackSegmentConditions() []feature.Condition {
	var list []string
	for i := 0; ; i++ {
		next := append(list, attackEntry(feature.MaxContextList+i))
		if i == 0 {
			next[0] = attackEntry(feature.MaxContextList - 1)
		}
		b, _ := json.Marshal([]feature.Condition{{Attribute: "tags", Op: feature.OpIn, Value: mustJSON(next)}})
		if len(b) > feature.MaxTargetingBytes || len(next) > feature.MaxListValues {
			break
		}
		list = next
	}
	return []feature.Condition{{Attribute: "tags", Op: feature.OpIn, Value: mustJSON(list)}}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// attackRules are the costliest rules within the limits: patterns up to
// feature.MaxFeaturePatternInsts, each against a string of
// feature.MaxMatchBytes that it scans whole and does not match; then, up
// to feature.MaxConditionChecks, rules of in_segment conditions of the
// segment attackSegmentConditions makes, which hold, but for the last of
// each rule, which does not, so that every condition runs.
func attackRules() ([]feature.Rule, error) {
	cond := func(attr, op string, v any) feature.Condition {
		return feature.Condition{Attribute: attr, Op: op, Value: mustJSON(v)}
	}
	never := cond("plan", feature.OpEq, "never")
	var rules []feature.Rule
	checks := 0
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
		checks += len(r.Conditions)
	}
	in := feature.Condition{Op: feature.OpInSegment, Value: mustJSON(attackSegment)}
	for checks < feature.MaxConditionChecks && len(rules) < feature.MaxRules {
		r := feature.Rule{Name: fmt.Sprintf("list%d", len(rules)), Serve: feature.Serve{Bucket: "B"}}
		for range min(feature.MaxConditions-1, feature.MaxConditionChecks-checks-1) {
			r.Conditions = append(r.Conditions, in)
		}
		r.Conditions = append(r.Conditions, never)
		rules = append(rules, r)
		checks += len(r.Conditions)
	}
	return rules, nil
}

// attackContext is the costliest context for attackRules, of
// feature.MaxContextBytes: the string the patterns scan whole; a list of
// feature.MaxContextList entries that fill feature.MaxListBytes, of which
// the segment's list holds only the last; and strings that fill the rest,
// which cost reading.
func attackContext() map[string]any {
	tags := make([]string, feature.MaxContextList)
	for i := range tags {
		tags[i] = attackEntry(i)
	}
	ctx := map[string]any{"email": strings.Repeat("a", feature.MaxMatchBytes), "plan": "pro", "tags": tags}
	size := len("email") + feature.MaxMatchBytes + len("plan") + len("pro") + len("tags") + feature.MaxListBytes
	for i := 0; size < feature.MaxContextBytes; i++ {
		name := fmt.Sprintf("pad%d", i)
		n := min(feature.MaxContextValueLen, feature.MaxContextBytes-size-len(name))
		if n <= 0 {
			break
		}
		ctx[name] = strings.Repeat("p", n)
		size += len(name) + n
	}
	return ctx
}

// AttackRound is one turn of the attack measurement: the victim alone
// (Load ""), beside the attack ("attack"), or beside as many clients
// sending ordinary evaluations ("plain").
type AttackRound struct {
	Load   string `json:"load"`
	Victim Stats  `json:"victim"`
	Attack Stats  `json:"attack"`
}

// Attack is the result of --attack.
type Attack struct {
	Rules        int           `json:"rules"`
	Conditions   int           `json:"conditions"`
	ContextBytes int           `json:"context_bytes"`
	Rounds       []AttackRound `json:"rounds"`
	// P99 of the victim, alone, beside the attack and beside ordinary
	// load, medians over the rounds; Ratio is with / without (the goal:
	// within 2), PlainRatio with / beside ordinary load.
	P99Without float64 `json:"p99_without_ms"`
	P99With    float64 `json:"p99_with_ms"`
	P99Plain   float64 `json:"p99_plain_ms"`
	Ratio      float64 `json:"p99_ratio"`
	PlainRatio float64 `json:"p99_plain_ratio"`
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
	segmentConditions := attackSegmentConditions()
	segment, _ := json.Marshal(map[string]any{"key": attackSegment, "description": "", "conditions": segmentConditions})
	if err := doStatus(ctx, client, s.url, s.edit, request{method: http.MethodPost, target: "/api/segments", body: segment}, http.StatusCreated); err != nil {
		return fmt.Errorf("create the attack's segment (as an editor): %w", err)
	}
	body, _ := json.Marshal(map[string]any{"key": attackKey, "buckets": benchBuckets, "rules": rules})
	if err := doStatus(ctx, client, s.url, s.edit, request{method: http.MethodPost, target: "/api/features", body: body}, http.StatusCreated); err != nil {
		return fmt.Errorf("create the attack's feature (as an editor): %w", err)
	}
	body, _ = json.Marshal(map[string]any{"user": "mallory", "features": []string{attackKey}, "context": attackContext()})
	loads := map[string][]request{"attack": {{method: http.MethodPost, target: "/evaluate", body: body}}}
	for i := range 1000 {
		plain, _ := json.Marshal(map[string]any{"user": userID(i), "features": []string{featureKey(i % cfg.features)}, "context": map[string]any{"plan": "pro", "country": "DE"}})
		loads["plain"] = append(loads["plain"], request{method: http.MethodPost, target: "/evaluate", body: plain})
	}
	var victim []request
	for i := range 1000 {
		victim = append(victim, request{method: http.MethodGet, target: "/evaluate?feature=" + featureKey(i%cfg.features) + "&user=" + userID(i)})
	}
	res := Attack{Rules: len(rules), ContextBytes: len(body)}
	for _, r := range rules {
		for _, c := range r.Conditions {
			if c.Op == feature.OpInSegment {
				res.Conditions += len(segmentConditions)
			} else {
				res.Conditions++
			}
		}
	}
	phase := func(load string, d time.Duration) AttackRound {
		round := AttackRound{Load: load}
		var wg sync.WaitGroup
		var a sample
		if load != "" {
			wg.Go(func() { a = drive(ctx, client, s.url, s.evaluate, loads[load], attackLoops, d) })
		}
		v := drive(ctx, client, s.url, s.evaluate, victim, 1, d)
		wg.Wait()
		round.Victim, round.Attack = summarize(v), summarize(a)
		return round
	}
	progress("attack: %d rules of %d conditions in all, a request of %d bytes; %d rounds of %v alone, beside %d attackers and beside %d clients of ordinary evaluations", res.Rules, res.Conditions, len(body), cfg.rounds, cfg.duration, attackLoops, attackLoops)
	for _, load := range []string{"", "attack", "plain"} {
		phase(load, min(cfg.duration/5, time.Second))
	}
	for range cfg.rounds {
		for _, load := range []string{"", "attack", "plain", "plain", "attack", ""} {
			r := phase(load, cfg.duration/2)
			res.Rounds = append(res.Rounds, r)
			progress("attack: load %q: victim p99 %.3f ms (%d requests), load p50 %.3f ms (%d requests, %d errors)", r.Load, r.Victim.P99, r.Victim.Requests, r.Attack.P50, r.Attack.Requests, r.Attack.Errors)
		}
	}
	p99 := map[string][]float64{}
	for _, r := range res.Rounds {
		p99[r.Load] = append(p99[r.Load], r.Victim.P99)
	}
	res.P99Without, res.P99With, res.P99Plain = median(p99[""]), median(p99["attack"]), median(p99["plain"])
	res.Ratio, res.PlainRatio = ratio(res.P99With, res.P99Without), ratio(res.P99With, res.P99Plain)
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(stdout, "attack: %d rules, %d conditions; POST /evaluate of %d bytes from %d clients against GET /evaluate of other features from 1\n", res.Rules, res.Conditions, res.ContextBytes, attackLoops)
	for _, r := range res.Rounds {
		load := r.Load
		if load == "" {
			load = "none"
		}
		fmt.Fprintf(stdout, "  load %-6s victim p50 %7.3f ms p99 %7.3f ms (%6d requests)   load p50 %8.3f ms p99 %8.3f ms (%5d requests, %d errors)\n",
			load, r.Victim.P50, r.Victim.P99, r.Victim.Requests, r.Attack.P50, r.Attack.P99, r.Attack.Requests, r.Attack.Errors)
	}
	fmt.Fprintf(stdout, "victim p99, median of rounds: %.3f ms alone, %.3f ms beside the attack, %.3f ms beside ordinary load: ratio %.2f to alone (goal: within 2), %.2f to ordinary load\n",
		res.P99Without, res.P99With, res.P99Plain, res.Ratio, res.PlainRatio)
	return nil
}
