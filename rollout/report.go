package rollout

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"

	"github.com/rollout/rollout/ring"
)

// How a report's figures were obtained.
const (
	// MethodExact: both versions hash users the same way, and the figures
	// are exact arcs of the hash space.
	MethodExact = "exact"
	// MethodExpected: the salt changed, so every user is hashed anew and
	// lands independently of where they were; the figures are the expected
	// fractions (share before × share after).
	MethodExpected = "expected"
)

// Report is the churn of one change: which fraction of users it moves, from
// where to where, and what naive modulo assignment would have moved. Shares
// are of the users the feature serves; no bucket (a disabled feature without
// fallback) has no share.
type Report struct {
	FromVersion     int                `json:"from_version"`
	ToVersion       int                `json:"to_version"`
	Method          string             `json:"method"`
	Churn           float64            `json:"churn"`
	Moves           []Move             `json:"moves"`
	SharesBefore    map[string]float64 `json:"shares_before"`
	SharesAfter     map[string]float64 `json:"shares_after"`
	ModuloChurn     float64            `json:"modulo_churn"`
	OverrideChanges []OverrideChange   `json:"override_changes,omitempty"`
}

// Move is a fraction of users that change bucket. From or To is "" for no
// bucket, which JSON shows as null.
type Move struct {
	From  string  `json:"-"`
	To    string  `json:"-"`
	Share float64 `json:"-"`
}

type moveJSON struct {
	From  *string `json:"from"`
	To    *string `json:"to"`
	Share float64 `json:"share"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// MarshalJSON shows no bucket as null.
func (m Move) MarshalJSON() ([]byte, error) {
	return json.Marshal(moveJSON{From: nullable(m.From), To: nullable(m.To), Share: m.Share})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *Move) UnmarshalJSON(data []byte) error {
	var j moveJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*m = Move{Share: j.Share}
	if j.From != nil {
		m.From = *j.From
	}
	if j.To != nil {
		m.To = *j.To
	}
	return nil
}

// OverrideChange is one overridden user whose bucket a change moves. These
// users are a countable few, outside the fractions of the hash space.
type OverrideChange struct {
	User string  `json:"user"`
	From *string `json:"from"`
	To   *string `json:"to"`
}

// newReport returns the churn report of the change from before (nil: the
// feature's creation, every user moving from no bucket) to after, over
// compiled features, whose rings are built already.
func newReport(before, after *compiled) Report {
	rb, ra := &ring.Ring{}, after.servedRing()
	rep := Report{ToVersion: after.feature.Version, Moves: []Move{}}
	if before != nil {
		rb, rep.FromVersion = before.servedRing(), before.feature.Version
	}
	rep.SharesBefore, rep.SharesAfter = rb.Shares(), ra.Shares()
	if before == nil || before.feature.Salt == after.feature.Salt {
		rep.Method = MethodExact
		c := ring.ChurnBetween(rb, ra)
		rep.Churn = c.Total
		for _, m := range c.Moves {
			rep.Moves = append(rep.Moves, Move(m))
		}
		rep.ModuloChurn = ring.ModuloChurn(rb, ra)
	} else {
		rep.Method = MethodExpected
		rep.Churn, rep.Moves = independentChurn(rep.SharesBefore, rep.SharesAfter)
		rep.ModuloChurn, _ = independentChurn(uniform(rb), uniform(ra))
	}
	rep.OverrideChanges = overrideChanges(before, after)
	return rep
}

// independentChurn is the expected churn when each user lands in after
// independently of where they were in before.
func independentChurn(before, after map[string]float64) (float64, []Move) {
	withNone := func(m map[string]float64) map[string]float64 {
		if len(m) == 0 {
			return map[string]float64{"": 1}
		}
		return m
	}
	before, after = withNone(before), withNone(after)
	var total float64
	moves := []Move{}
	for _, from := range slices.Sorted(maps.Keys(before)) {
		for _, to := range slices.Sorted(maps.Keys(after)) {
			if share := before[from] * after[to]; from != to && share > 0 {
				total += share
				moves = append(moves, Move{From: from, To: to, Share: share})
			}
		}
	}
	slices.SortStableFunc(moves, func(x, y Move) int { return cmp.Compare(y.Share, x.Share) })
	return total, moves
}

// uniform gives each bucket of r an equal share, as modulo assignment does.
func uniform(r *ring.Ring) map[string]float64 {
	out := map[string]float64{}
	for _, b := range r.Buckets() {
		out[b.Name] = 1 / float64(len(r.Buckets()))
	}
	return out
}

func overrideChanges(before, after *compiled) []OverrideChange {
	var prior map[string]string
	if before != nil {
		prior = before.feature.Overrides
	}
	users := slices.Sorted(maps.Keys(prior))
	for u := range after.feature.Overrides {
		if _, ok := prior[u]; !ok {
			users = append(users, u)
		}
	}
	if len(users) == 0 {
		return nil
	}
	slices.Sort(users)
	var out []OverrideChange
	for _, u := range users {
		from, to := "", after.peek(u).Bucket
		if before != nil {
			from = before.peek(u).Bucket
		}
		if from != to {
			out = append(out, OverrideChange{User: u, From: nullable(from), To: nullable(to)})
		}
	}
	return out
}
