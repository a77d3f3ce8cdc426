package plan

import (
	"cmp"
	"context"
	"errors"
	"math"
	"math/bits"
	"slices"
	"strconv"

	"github.com/rollout/rollout/ring"
)

// The planner searches replica counts. A bucket with n replicas owns the
// ring points of its replicas 0 … n-1, so a count is a prefix of the
// bucket's points, and every ring the search can reach is a subset of one
// universe: replicas 0 … Limits.MaxReplicas-1 of every bucket, sorted once. The
// hash space is cut at every universe point into segments; a segment is
// served by the first active point at or after it. Adding replica n_b of
// bucket b takes the segments from the active point before it up to it from
// their one owner; removing replica n_b-1 gives them to the owner of the
// next active point. Nothing else moves, so each step updates two shares,
// the churn and the tolerance excess exactly (integers) in time
// proportional to the arc it moves, and can be undone exactly.

// unitBits: the search counts the hash space in units of 2^-58 (so that
// churn plus weighted excess stays far inside an int64); each segment is
// the difference of positions truncated to that unit, so the segments add
// up to exactly the whole. The plan's reported figures are computed
// afterwards with package ring's exact 128-bit arithmetic.
const (
	unitBits  = 58
	unitWhole = int64(1) << unitBits
	// excessWeight is the cost of a unit of tolerance excess against a
	// unit of churn in the first phase of the search: above 1, so that
	// moving users from a bucket above tolerance to one within it pays.
	excessWeight = 4
	// pairWindow is how far pair moves change the first bucket.
	pairWindow = 3
	// boxBudget bounds the replica counts that boxSearch tries.
	boxBudget = 1 << 16
	// boxMaxUniverse: boxSearch runs only on universes of at most this
	// many points: those of coarse limits (1,000 replicas per bucket, at
	// most five buckets free), where it costs milliseconds. On a fine
	// universe (20,000 replicas per bucket) each of its tries sweeps arcs
	// of thousands of segments, a second in all, and its small rings are
	// far from a fine tolerance: the descents from the ring planned from
	// and its scalings reach it.
	boxMaxUniverse = 10_000
	// lineReach is how many replicas a line move adds or removes at
	// least; it tries up to double the count, or half of it, and the
	// second bucket of a pair move tries this many either way.
	lineReach = 32
)

type planSpace struct {
	target    []int64 // by bucket, in units
	tol       int64
	lo, hi    []int // bounds of each bucket's count
	maxPoints int

	idx  [][]int32 // idx[b][i]: universe index of replica i of bucket b
	size []int64   // segment k is the arc (point k-1, point k]
	pb   []int32   // bucket of universe point k
	pi   []int32   // replica index of universe point k
	orig []int32   // owner of segment k in the ring planned from; -1 none

	n      []int // current counts
	total  int
	active []bool
	owner  []int32 // owner of segment k with counts n
	share  []int64
	kept   []int64    // units bucket b owns that it owned in the ring planned from
	origSh []int64    // units bucket b owned in the ring planned from
	before *ring.Ring // the ring planned from, when its caller has built it

	// The universe: names, each bucket's positions hashed so far (replicas
	// 0 to len-1), the counts of the ring planned from, each bucket's limit
	// (the most replicas the universe can hold) and their sum.
	names    []string
	pos      [][]ring.Position
	ref      []int
	limit    []int
	universe int
	counted  bool  // setCounts has set the counts
	churn    int64 // units of segments whose owner differs from orig
	excess   int64 // Σ max(0, |share-target| - tol)

	// The search's bounds: it stops once it has taken budget steps (a
	// replica added or removed) or ctx is done, and cut says why. Stopped
	// by its budget, it takes reserve steps more to improve what it found.
	ctx       context.Context
	budget    int64
	reserve   int64
	steps     int64
	nextCheck int64 // steps at which ctx is next looked at
	cut       string
}

// ctxCheckEvery is how many steps the search takes between looks at its
// context: a step costs well under a microsecond, a look a lock.
const ctxCheckEvery = 1024

// stopped reports whether the search must stop: its budget spent or its
// context done. Once it has said so, it keeps saying so.
func (sp *planSpace) stopped() bool {
	switch {
	case sp.cut != "":
		return true
	case sp.steps >= sp.budget:
		sp.cut = CutBudget
	case sp.steps >= sp.nextCheck:
		sp.nextCheck = sp.steps + ctxCheckEvery
		if err := sp.ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
			sp.cut = CutDeadline
		} else if err != nil {
			sp.cut = CutCanceled
		}
	}
	return sp.cut != ""
}

// newPlanSpace returns the search space of the buckets names (sorted),
// measured against the ring of current (may be nil), within lim, with no
// bound on its search until its ctx, budget and reserve are set. Set its
// counts with setCounts before searching.
func newPlanSpace(names []string, current map[string]int, targets map[string]float64, tol float64, lim Limits, h hashes) *planSpace {
	nb := len(names)
	sp := &planSpace{
		target: make([]int64, nb), tol: toUnits(tol),
		lo: make([]int, nb), hi: make([]int, nb), maxPoints: lim.MaxPoints,
		idx: make([][]int32, nb), n: make([]int, nb), share: make([]int64, nb),
		kept: make([]int64, nb), origSh: make([]int64, nb),
		ctx: context.Background(), budget: math.MaxInt64,
	}
	sumLo := 0
	for b, name := range names {
		sp.target[b] = toUnits(targets[name])
		if targets[name] > 0 {
			sp.lo[b] = 1
		}
		sumLo += sp.lo[b]
	}
	for b := range names {
		if sp.lo[b] > 0 {
			sp.hi[b] = min(lim.MaxReplicas, sp.maxPoints-(sumLo-sp.lo[b]))
		}
	}
	sp.build(names, current, h)
	return sp
}

// build sets up the universe of the buckets names (sorted): replicas 0 to
// max(hi, current) - 1 of each, and the owners of the ring of current,
// hashing only the points h (may be nil) does not hold. A
// universe of more than boxMaxUniverse points (fine limits: 20,000
// replicas a bucket) is hashed lazily: at first only the replicas of
// current, and more as the search reaches them (see reach). Its figures do
// not depend on how much of it is hashed: a segment's size is a difference
// of truncated positions, so the arcs between the points a ring has add up
// to the same units however many other points cut them.
func (sp *planSpace) build(names []string, current map[string]int, h hashes) {
	nb := len(names)
	sp.names, sp.pos, sp.ref, sp.limit = names, make([][]ring.Position, nb), make([]int, nb), make([]int, nb)
	sp.universe = 0
	for b, name := range names {
		sp.pos[b] = slices.Clip(h[name]) // appending copies: h stays as it is
		sp.ref[b] = current[name]
		sp.limit[b] = max(sp.hi[b], current[name])
		sp.universe += sp.limit[b]
	}
	want := sp.limit
	if sp.universe > boxMaxUniverse {
		want = sp.ref
	}
	sp.hash(want)
}

// reach makes sure the universe holds replicas 0 to counts[b] - 1 of every
// bucket b: when it does not, it hashes twice as many as counts asks and
// lazyMargin more, within the bucket's limit (a line move reaches up to
// twice a count: one growth serves it), and rebuilds the
// universe's segments; the search's counts and figures then stay as they
// were. It returns whether it rebuilt.
func (sp *planSpace) reach(counts []int) bool {
	grow := false
	want := make([]int, len(counts))
	for b, c := range counts {
		want[b] = len(sp.pos[b])
		if c > want[b] {
			want[b], grow = min(sp.limit[b], 2*c+lazyMargin), true
		}
	}
	if grow {
		sp.hash(want)
	}
	return grow
}

// lazyMargin is how many replicas more than the search asks for a lazy
// universe hashes at least when it grows.
const lazyMargin = 256

// hash extends the universe to replicas 0 to want[b] - 1 of each bucket b
// and rebuilds its segments, the owners of the ring planned from and, when
// the search has counts, its figures at them.
func (sp *planSpace) hash(want []int) {
	buf := make([]byte, 0, 80)
	u := 0
	for b, name := range sp.names {
		for i := len(sp.pos[b]); i < want[b]; i++ {
			buf = strconv.AppendInt(append(append(buf[:0], name...), '#'), int64(i), 10)
			sp.pos[b] = append(sp.pos[b], ring.HashBytes(buf))
		}
		u += len(sp.pos[b])
	}
	pts := make([]upoint, 0, u)
	for b, ps := range sp.pos {
		for i, p := range ps {
			pts = append(pts, upoint{pos: p, b: int32(b), i: int32(i)})
		}
		sp.idx[b] = make([]int32, len(ps))
	}
	pts = sortUniverse(pts)
	sp.size, sp.pb, sp.pi = make([]int64, u), make([]int32, u), make([]int32, u)
	sp.active, sp.owner = make([]bool, u), make([]int32, u)
	trunc := func(p ring.Position) int64 { return int64(p.Hi >> (64 - unitBits)) }
	for k, p := range pts {
		sp.pb[k], sp.pi[k] = p.b, p.i
		sp.idx[p.b][p.i] = int32(k)
		if k > 0 {
			sp.size[k] = trunc(p.pos) - trunc(pts[k-1].pos)
		}
	}
	if u > 0 {
		sp.size[0] = unitWhole - trunc(pts[u-1].pos) + trunc(pts[0].pos)
	}
	sp.orig = sp.owners(sp.ref)
	clear(sp.origSh)
	for k, o := range sp.orig {
		if o >= 0 {
			sp.origSh[o] += sp.size[k]
		}
	}
	if sp.counted {
		sp.figures()
	}
}

type upoint struct {
	pos  ring.Position
	b, i int32
}

// sortUniverse returns pts in ring order: by position, then bucket (names
// are sorted). MD5 positions are uniform, so it deals them into about as
// many bins as points by their leading bits, in one pass, and sorts each
// bin, of one or two points on average, by insertion: linear time, where a
// comparison sort of the 120,000 points of six fine buckets took tens of
// milliseconds.
func sortUniverse(pts []upoint) []upoint {
	if len(pts) < 2 {
		return pts
	}
	k := uint(bits.Len(uint(len(pts))))
	shift := 64 - k
	start := make([]int32, 1<<k+1)
	for _, p := range pts {
		start[p.pos.Hi>>shift+1]++
	}
	for j := 1; j < len(start); j++ {
		start[j] += start[j-1]
	}
	out := make([]upoint, len(pts))
	next := slices.Clone(start[:len(start)-1])
	for _, p := range pts {
		j := p.pos.Hi >> shift
		out[next[j]] = p
		next[j]++
	}
	less := func(x, y upoint) bool {
		return cmp.Or(x.pos.Compare(y.pos), cmp.Compare(x.b, y.b)) < 0
	}
	for j := range len(start) - 1 {
		bin := out[start[j]:start[j+1]]
		for a := 1; a < len(bin); a++ {
			for c := a; c > 0 && less(bin[c], bin[c-1]); c-- {
				bin[c], bin[c-1] = bin[c-1], bin[c]
			}
		}
	}
	return out
}

// setCounts moves the search to the given counts, clamped to the bounds.
func (sp *planSpace) setCounts(counts []int) {
	sp.total = 0
	for b, c := range counts {
		sp.n[b] = min(max(c, sp.lo[b]), sp.hi[b])
		sp.total += sp.n[b]
	}
	for sp.total > sp.maxPoints { // e.g. a new bucket's first replica on a full feature
		big := 0
		for b := range sp.n {
			if sp.n[b]-sp.lo[b] > sp.n[big]-sp.lo[big] {
				big = b
			}
		}
		sp.n[big]--
		sp.total--
	}
	sp.counted = true
	if !sp.reach(sp.n) {
		sp.figures()
	}
}

// figures computes the owners, shares, churn and excess of the counts
// afresh.
func (sp *planSpace) figures() {
	sp.owner = sp.owners(sp.n)
	for k := range sp.active {
		sp.active[k] = int(sp.pi[k]) < sp.n[sp.pb[k]]
	}
	clear(sp.share)
	clear(sp.kept)
	sp.churn, sp.excess = 0, 0
	for k, o := range sp.owner {
		if o >= 0 {
			sp.share[o] += sp.size[k]
		}
		if o != sp.orig[k] {
			sp.churn += sp.size[k]
		} else if o >= 0 {
			sp.kept[o] += sp.size[k]
		}
	}
	for b := range sp.n {
		sp.excess += sp.excessOf(b)
	}
}

// toUnits converts a fraction of the hash space to units.
func toUnits(f float64) int64 { return int64(f * float64(unitWhole)) }

// owners returns the owner of every segment when bucket b has counts[b]
// replicas: the bucket of the first active point at or after it.
func (sp *planSpace) owners(counts []int) []int32 {
	u := len(sp.pb)
	out := make([]int32, u)
	owner := int32(-1)
	for k := 2*u - 1; k >= 0; k-- {
		j := k % u
		if int(sp.pi[j]) < counts[sp.pb[j]] {
			owner = sp.pb[j]
		}
		if k < u {
			out[j] = owner
		}
	}
	return out
}

func (sp *planSpace) excessOf(b int) int64 {
	d := sp.share[b] - sp.target[b]
	if d < 0 {
		d = -d
	}
	return max(0, d-sp.tol)
}

// transfer moves amount units of share from bucket from to bucket to.
func (sp *planSpace) transfer(from, to int32, amount int64) {
	if from == to {
		return
	}
	for _, b := range [2]int32{from, to} {
		if b >= 0 {
			sp.excess -= sp.excessOf(int(b))
		}
	}
	if from >= 0 {
		sp.share[from] -= amount
	}
	if to >= 0 {
		sp.share[to] += amount
	}
	for _, b := range [2]int32{from, to} {
		if b >= 0 {
			sp.excess += sp.excessOf(int(b))
		}
	}
}

func (sp *planSpace) prev(k int) int {
	if k == 0 {
		return len(sp.pb) - 1
	}
	return k - 1
}

func (sp *planSpace) canAdd(b int) bool    { return sp.n[b] < sp.hi[b] && sp.total < sp.maxPoints }
func (sp *planSpace) canRemove(b int) bool { return sp.n[b] > sp.lo[b] }

// add activates replica n[b] of bucket b: the arc from the active point
// before it up to it moves from its owner to b.
func (sp *planSpace) add(b int) {
	sp.steps++
	if sp.n[b] == len(sp.idx[b]) {
		want := slices.Clone(sp.n)
		want[b]++
		sp.reach(want)
	}
	u := int(sp.idx[b][sp.n[b]])
	sp.n[b]++
	sp.total++
	sp.active[u] = true
	sp.reassign(u, sp.owner[u], int32(b))
}

// remove deactivates replica n[b]-1 of bucket b: its arc moves to the owner
// of the next active point.
func (sp *planSpace) remove(b int) {
	sp.steps++
	sp.n[b]--
	sp.total--
	u := int(sp.idx[b][sp.n[b]])
	sp.active[u] = false
	next := u + 1
	if next == len(sp.pb) {
		next = 0
	}
	sp.reassign(u, int32(b), sp.owner[next])
}

// reassign gives the arc that ends at point u and starts after the active
// point before it from owner from to owner to.
func (sp *planSpace) reassign(u int, from, to int32) {
	var moved, back, away int64 // back: to its owner before; away: from it
	for k := u; ; {
		s := sp.size[k]
		moved += s
		if o := sp.orig[k]; o == to {
			back += s
		} else if o == from {
			away += s
		}
		sp.owner[k] = to
		if k = sp.prev(k); sp.active[k] || k == u {
			break
		}
	}
	if from != to {
		sp.churn += away - back
		if from >= 0 {
			sp.kept[from] -= away
		}
		if to >= 0 {
			sp.kept[to] += back
		}
	}
	sp.transfer(from, to, moved)
}

// step changes bucket b's count by d, which must be within its bounds.
func (sp *planSpace) step(b, d int) {
	for ; d > 0; d-- {
		sp.add(b)
	}
	for ; d < 0; d++ {
		sp.remove(b)
	}
}

// score is what the search minimizes.
type score struct{ excess, churn int64 }

func (sp *planSpace) score() score { return score{sp.excess, sp.churn} }

// better reports whether s is better than t: in phase 0 by churn plus
// weighted excess, in phase 1 by excess first, then churn.
func better(s, t score, phase int) bool {
	if phase == 0 {
		return s.churn+excessWeight*s.excess < t.churn+excessWeight*t.excess
	}
	return s.excess < t.excess || s.excess == t.excess && s.churn < t.churn
}

// bestLine returns the change of bucket b's count, within reach, that
// scores best, and its score; 0 and the current score when none is better.
// Stopped, it returns the best of the changes it tried. It walks each way
// only while a count further on could score better than both the best it
// has found and bar (see hopeless), so its answer is the one of the whole
// walk whenever that answer scores better than bar; when it does not, the
// caller, which keeps only moves better than bar, has no use for it.
func (sp *planSpace) bestLine(b, down, up, phase int, bar score) (int, score) {
	n0 := sp.n[b]
	best, bestD := sp.score(), 0
	for sp.n[b]-n0 < up && sp.canAdd(b) && !sp.hopeless(b, 1, best, bar, phase) && !sp.stopped() {
		sp.add(b)
		if s := sp.score(); better(s, best, phase) {
			best, bestD = s, sp.n[b]-n0
		}
	}
	sp.step(b, n0-sp.n[b])
	for n0-sp.n[b] < down && sp.canRemove(b) && !sp.hopeless(b, -1, best, bar, phase) && !sp.stopped() {
		sp.remove(b)
		if s := sp.score(); better(s, best, phase) {
			best, bestD = s, sp.n[b]-n0
		}
	}
	sp.step(b, n0-sp.n[b])
	return bestD, best
}

// hopeless reports whether no count reached by going on changing bucket b's
// count in direction dir (+1 adding replicas, -1 removing them) can score
// better than best or bar. Adding replicas of b only moves users into b,
// removing them only out of it, so along the way b's share only grows (or
// only shrinks) and every other share only shrinks (grows): a bucket's
// excess, once its share is past its target in the direction it moves, can
// only grow. Churn can only fall by the users that go back to the bucket
// they had in the ring planned from: into b those it had and lost, out of b
// those it holds that were another's. These bounds are exact integers, so
// skipping what they rule out changes no answer the caller keeps.
func (sp *planSpace) hopeless(b, dir int, best, bar score, phase int) bool {
	var excess int64
	for o := range sp.n {
		grows := (o == b) == (dir > 0)
		if d := sp.share[o] - sp.target[o]; grows && d >= 0 || !grows && d <= 0 {
			excess += sp.excessOf(o)
		}
	}
	churn := sp.churn - (sp.origSh[b] - sp.kept[b])
	if dir < 0 {
		churn = sp.churn - (sp.share[b] - sp.kept[b])
	}
	bound := score{excess, churn}
	return !better(bound, best, phase) && !better(bound, bar, phase)
}

// descend improves the counts until no move scores better: the best line
// move of one bucket, else the best pair move. Stopped, it makes the best
// move it found, if any, and returns.
func (sp *planSpace) descend(phase int) {
	for !sp.stopped() {
		if !sp.lineMove(phase) && !sp.pairMove(phase) {
			return
		}
	}
}

// lineMove makes the best line move of one bucket, if it scores better
// than now. Stopped, it makes the best of the moves it tried.
func (sp *planSpace) lineMove(phase int) bool {
	best, bb, bd := sp.score(), -1, 0
	for b := range sp.n {
		d, s := sp.bestLine(b, max(lineReach, sp.n[b]/2), max(lineReach, sp.n[b]), phase, best)
		if d != 0 && better(s, best, phase) {
			best, bb, bd = s, b, d
		}
	}
	if bb < 0 {
		return false
	}
	sp.step(bb, bd)
	return true
}

// pairMove makes the best move that changes one bucket by up to pairWindow
// replicas and another by up to lineReach, if it scores better than now.
// Stopped, it makes the best of the moves it tried.
func (sp *planSpace) pairMove(phase int) bool {
	type move struct{ a, da, b, db int }
	best, found := sp.score(), move{a: -1}
	for a := range sp.n {
		for da := -pairWindow; da <= pairWindow && !sp.stopped(); da++ {
			if da == 0 || sp.n[a]+da < sp.lo[a] || sp.n[a]+da > sp.hi[a] || sp.total+da > sp.maxPoints {
				continue
			}
			sp.step(a, da)
			for b := range sp.n {
				if b == a {
					continue
				}
				if db, s := sp.bestLine(b, lineReach, lineReach, phase, best); db != 0 && better(s, best, phase) {
					best, found = s, move{a, da, b, db}
				}
			}
			sp.step(a, -da)
		}
	}
	if found.a < 0 {
		return false
	}
	sp.step(found.a, found.da)
	sp.step(found.b, found.db)
	return true
}

// search runs the two phases from each start in turn — first trading
// excess against churn, then reaching the tolerance if it can and moving
// fewer users within it — and leaves the counts at the best result. With
// stopWithin it stops at the first result within tolerance. Stopped, it
// leaves them at the best it reached: the starts it has not descended
// from still count as they are; stopped by its budget, it then spends its
// reserve descending from the best in phase 1.
func (sp *planSpace) search(starts [][]int, stopWithin bool) {
	var best []int
	var bestScore score
	if box := sp.boxSearch(); box != nil {
		starts = append(starts, box)
	}
	for _, start := range starts {
		sp.setCounts(start)
		if sp.excess > 0 && !sp.stopped() {
			// Phase 0 may trade a little excess for less churn; from
			// within tolerance it could only leave it.
			sp.descend(0)
		}
		if !sp.stopped() {
			sp.descend(1)
		}
		if best == nil || better(sp.score(), bestScore, 1) {
			best, bestScore = slices.Clone(sp.n), sp.score()
		}
		if stopWithin && bestScore.excess == 0 {
			break
		}
	}
	if sp.cut == CutBudget && sp.reserve > 0 {
		// Cut short, perhaps far from the tolerance after trading excess
		// for churn: spend the reserve descending from the best counts,
		// toward the tolerance first.
		sp.setCounts(best)
		sp.cut, sp.budget, sp.reserve = "", sp.steps+sp.reserve, 0
		sp.descend(1)
		if better(sp.score(), bestScore, 1) {
			best = slices.Clone(sp.n)
		}
		sp.cut = CutBudget
	}
	sp.setCounts(best)
}

// boxSearch tries every count from the bucket's least up to m for each
// bucket, where m is the largest that keeps the number of tries within
// boxBudget, and returns the best counts by excess, then churn; nil when
// m would be below 8 or the universe has more than boxMaxUniverse points. On small rings, whose shares move in lumps, this
// finds combinations the line and pair moves cannot reach one step at a
// time; the search then descends from them like from any start.
func (sp *planSpace) boxSearch() []int {
	free := 0
	for b := range sp.n {
		if sp.hi[b] > sp.lo[b] {
			free++
		}
	}
	m := 1
	for pow(m+1, free) <= boxBudget {
		m++
	}
	if m < 8 || sp.universe > boxMaxUniverse {
		return nil
	}
	counts := make([]int, len(sp.n))
	for b := range counts {
		counts[b] = min(sp.lo[b], sp.hi[b])
	}
	sp.setCounts(counts)
	var best []int
	var bestScore score
	var walk func(b int)
	walk = func(b int) {
		if b == len(sp.n) {
			if best == nil || better(sp.score(), bestScore, 1) {
				best, bestScore = slices.Clone(sp.n), sp.score()
			}
			return
		}
		n0 := sp.n[b]
		walk(b + 1)
		for sp.n[b] < min(m, sp.hi[b]) && sp.canAdd(b) && !sp.stopped() {
			sp.add(b)
			walk(b + 1)
		}
		sp.step(b, n0-sp.n[b])
	}
	walk(0)
	return best
}

func pow(x, n int) int {
	p := 1
	for range n {
		if p > boxBudget {
			break
		}
		p *= x
	}
	return p
}
