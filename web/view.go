package web

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/stats"
)

// palette is the number of bucket colours the stylesheet defines (.c0 …).
// Colour only repeats what labels say: every bar has a legend with names and
// percentages.
const palette = 8

// pct formats a fraction of users as a percentage with two decimals. A share
// that is not zero never reads as 0.00%, nor one short of everyone as 100.00%.
func pct(x float64) string {
	switch {
	case x > 0 && x < 0.00005:
		return "<0.01%"
	case x < 1 && x >= 0.99995:
		return ">99.99%"
	}
	return strconv.FormatFloat(100*x, 'f', 2, 64) + "%"
}

// pct1 formats a share of users as people read one they asked for: one
// decimal, so that a 50/50 split planned to within its tolerance reads
// 50.0% / 50.0%, not 49.98% / 50.02%. The exact share goes beside it (a
// title, a details table). A share that is not zero never reads as 0.0%,
// nor one short of everyone as 100.0%.
func pct1(x float64) string {
	switch {
	case x > 0 && x < 0.0005:
		return "<0.1%"
	case x < 1 && x >= 0.9995:
		return ">99.9%"
	}
	return strconv.FormatFloat(100*x, 'f', 1, 64) + "%"
}

// exactPct formats a fraction of users as a percentage with five
// decimals: what a share is exactly, beside what was asked.
func exactPct(x float64) string { return strconv.FormatFloat(100*x, 'f', 5, 64) + "%" }

// pvalue formats a p-value for people: four decimals, and "< 0.0001"
// below them.
func pvalue(p float64) string {
	if p < 0.0001 {
		return "< 0.0001"
	}
	return strconv.FormatFloat(p, 'f', 4, 64)
}

// num formats a coordinate for an SVG attribute.
func num(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }

// when formats a time for people: minutes, in UTC.
func when(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// iso formats a time for a <time datetime> attribute.
func iso(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// sentence capitalises the first letter of s.
func sentence(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// thousands formats n with commas: 10,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// plural returns "1 user" or "3 users".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// reason says why a user got their bucket.
func reason(r string) string {
	switch r {
	case feature.ReasonRing:
		return "ring"
	case feature.ReasonOverride:
		return "override"
	case feature.ReasonDisabled:
		return "feature off"
	case feature.ReasonPrerequisiteFailed:
		return "prerequisite failed"
	}
	return r
}

// defaultReplicas proposes the replicas of a new bucket: those of the
// feature's last bucket, so that it gets a comparable share.
func defaultReplicas(f feature.Feature) int {
	if len(f.Buckets) == 0 {
		return feature.DefaultReplicas
	}
	return f.Buckets[len(f.Buckets)-1].Replicas
}

// colors assigns each bucket of f a colour class by its place in the list.
func colors(f feature.Feature) map[string]int {
	out := make(map[string]int, len(f.Buckets))
	for i, b := range f.Buckets {
		out[b.Name] = i % palette
	}
	return out
}

// segment is one bucket's part of a share bar, in percent of the bar's width.
type segment struct {
	Name  string
	Share float64
	X, W  float64
	Color int
	Label bool // wide enough to carry its name inside the bar
}

// shareBar is a horizontal bar of the shares of users each bucket gets, in
// the order of names.
type shareBar struct {
	Segments []segment
}

// newBar returns the bar of shares over names, coloured by colour.
func newBar(names []string, shares map[string]float64, colour map[string]int) shareBar {
	var b shareBar
	x := 0.0
	for _, name := range names {
		s := shares[name]
		w := 100 * s
		b.Segments = append(b.Segments, segment{
			Name: name, Share: s, X: x, W: w, Color: colour[name],
			Label: w >= labelWidth(name),
		})
		x += w
	}
	return b
}

// labelWidth is the width, in percent of a bar, that a segment needs to
// carry name legibly on a phone-wide bar (about 8px a character at 340px).
func labelWidth(name string) float64 {
	return 1.5 + 2.5*float64(utf8.RuneCountInString(name))
}

// Mid is the middle of the segment, where its label goes.
func (s segment) Mid() float64 { return s.X + s.W/2 }

// AriaLabel is the bar said in words.
func (b shareBar) AriaLabel() string {
	parts := make([]string, len(b.Segments))
	for i, s := range b.Segments {
		parts[i] = s.Name + " " + pct(s.Share)
	}
	return "Shares of users: " + strings.Join(parts, ", ")
}

// moveView is one from→to part of a change's churn.
type moveView struct {
	From, To string
	Share    float64
}

// bucketLabel names a bucket, or its absence.
func bucketLabel(name string) string {
	if name == "" {
		return "no bucket"
	}
	return name
}

func movesOf(r feature.Report) []moveView {
	out := make([]moveView, len(r.Moves))
	for i, m := range r.Moves {
		out[i] = moveView{From: bucketLabel(m.From), To: bucketLabel(m.To), Share: m.Share}
	}
	return out
}

// direction says where a change's moves go when they share a destination or
// an origin: "all into D", "all out of B"; "" otherwise.
func direction(moves []feature.Move) string {
	if len(moves) == 0 {
		return ""
	}
	sameTo, sameFrom := true, true
	for _, m := range moves[1:] {
		sameTo = sameTo && m.To == moves[0].To
		sameFrom = sameFrom && m.From == moves[0].From
	}
	switch {
	case sameTo && moves[0].To == "":
		return "all to no bucket (apps serve their default)"
	case sameTo:
		return "all into " + moves[0].To
	case sameFrom && moves[0].From == "":
		return "all from no bucket"
	case sameFrom:
		return "all out of " + moves[0].From
	}
	return ""
}

// versionView is one entry of a feature's history as the page shows it.
type versionView struct {
	Version         int
	Actor           string
	Time            time.Time
	Summary         string
	Comment         string
	Created         bool // the feature's creation: every user got a bucket
	Exact           bool // exact figures; false: expected after a reshuffle
	Churn           float64
	Modulo          float64
	ModuloShown     bool       // the change changed the number of buckets: naive mod N is worth comparing
	Range           float64    // what range bucketing would have moved
	RangeShown      bool       // a change of shares that moved users: the range baseline is worth comparing
	SRM             *stats.SRM // the sample-ratio check of the exposures counted at this version, if any
	Direction       string
	Moves           []moveView
	MoreMoves       int
	OverrideChanges int
	Bar             shareBar // shares after the change
	// Populations are those a change of rules (or of a segment they use)
	// moved, in the server's words: "users matching plan = pro: the ring → on".
	Populations []string
}

// maxMovesShown bounds the moves listed for one version.
const maxMovesShown = 8

func viewVersion(v rollout.Version) versionView {
	r := v.Report
	vv := versionView{
		Version: v.Version, Actor: v.Actor, Time: v.Time, Summary: sentence(v.Summary), Comment: v.Comment,
		Created: r.FromVersion == 0, Exact: r.Method != feature.MethodExpected,
		Churn: r.Churn, Modulo: r.ModuloChurn, Range: r.RangeChurn, Direction: direction(r.Moves),
		Moves: movesOf(r), OverrideChanges: len(r.OverrideChanges),
	}
	for _, p := range r.Rules {
		vv.Populations = append(vv.Populations, p.Text)
	}
	// Reports stored before range churn was counted have none: no baseline.
	vv.RangeShown = !vv.Created && vv.Exact && r.Churn > 0 && r.RangeChurn > 0
	if len(vv.Moves) > maxMovesShown {
		vv.MoreMoves = len(vv.Moves) - maxMovesShown
		vv.Moves = vv.Moves[:maxMovesShown]
	}
	names := make([]string, 0, len(v.Config.Buckets))
	for _, b := range v.Config.Buckets {
		if _, ok := r.SharesAfter[b.Name]; ok {
			names = append(names, b.Name)
		}
	}
	vv.Bar = newBar(names, r.SharesAfter, colors(v.Config))
	return vv
}

// Chart geometry, in percent of the chart's width and in pixels of height:
// the version labels take the left column, bars are drawn to scale (100% of
// users = barScale) and their numbers follow them.
const (
	chartLabelCol  = 11.0
	chartBarScale  = 50.0
	chartRowHeight = 58
	chartTop       = 26
	chartMaxRows   = 30
)

// churnChart is the churn of each change, newest first, beside what naive
// modulo assignment would have moved.
type churnChart struct {
	Rows   []chartRow
	Ticks  []chartTick
	Height int
	Left   float64 // x of the 0% axis
	Hidden int     // older changes not drawn
	Modulo bool    // some row compares with naive mod N
	Range  bool    // some row compares with range bucketing
}

type chartRow struct {
	Version         int
	Y               int
	Churn, Modulo   float64
	ChurnW, ModuloW float64
	ChurnX, ModuloX float64 // where each number is written
	Exact           bool
	ModuloShown     bool
	Range, RangeW   float64 // what range bucketing would have moved
	RangeX          float64
	RangeShown      bool
	Summary         string
}

type chartTick struct {
	X     float64
	Label string
}

// newChart draws the changes among versions (newest first); the creation has
// no churn to compare and is left out.
func newChart(versions []versionView) churnChart {
	c := churnChart{Left: chartLabelCol}
	for _, p := range []float64{0, 0.25, 0.5, 0.75, 1} {
		c.Ticks = append(c.Ticks, chartTick{X: chartLabelCol + chartBarScale*p, Label: fmt.Sprintf("%d%%", int(100*p))})
	}
	for _, v := range versions {
		if v.Created {
			continue
		}
		if len(c.Rows) == chartMaxRows {
			c.Hidden++
			continue
		}
		y := chartTop + len(c.Rows)*chartRowHeight
		cw, mw := chartBarScale*v.Churn, chartBarScale*v.Modulo
		c.Rows = append(c.Rows, chartRow{
			Version: v.Version, Y: y, Churn: v.Churn, Modulo: v.Modulo, Exact: v.Exact, Summary: v.Summary, ModuloShown: v.ModuloShown,
			ChurnW: cw, ModuloW: mw, ChurnX: chartLabelCol + cw + 1, ModuloX: chartLabelCol + mw + 1,
			Range: v.Range, RangeShown: v.RangeShown, RangeW: chartBarScale * v.Range, RangeX: chartLabelCol + chartBarScale*v.Range + 1,
		})
	}
	for _, r := range c.Rows {
		c.Modulo = c.Modulo || r.ModuloShown
		c.Range = c.Range || r.RangeShown
	}
	c.Height = chartTop + len(c.Rows)*chartRowHeight + 4
	return c
}

// markModulo shows naive mod N beside the changes among views (newest first,
// from versions) that changed the number of buckets: for other changes
// (replicas, overrides, kill switch, reshuffle) it is no useful comparison.
// A version whose previous one is not among versions is compared with its
// report's shares.
func markModulo(views []versionView, versions []rollout.Version) {
	for i, v := range versions {
		if views[i].Created {
			continue
		}
		before := len(v.Report.SharesBefore)
		if i+1 < len(versions) {
			before = len(versions[i+1].Config.Buckets)
		}
		views[i].ModuloShown = before != len(v.Config.Buckets)
	}
}

// targetValues returns shares as percentages with two decimals that add up
// to exactly 100 (largest remainder first), for the target fields.
func targetValues(shares []float64) []string {
	hundredths := make([]int, len(shares))
	type rest struct {
		i int
		r float64
	}
	var rests []rest
	total := 0
	for i, s := range shares {
		x := 10000 * s
		hundredths[i] = int(math.Floor(x))
		total += hundredths[i]
		rests = append(rests, rest{i, x - math.Floor(x)})
	}
	if total == 0 {
		out := make([]string, len(shares))
		for i := range out {
			out[i] = "0"
		}
		return out
	}
	slices.SortStableFunc(rests, func(a, b rest) int { return cmp.Compare(b.r, a.r) })
	for k := 0; total < 10000 && k < len(rests); k++ {
		hundredths[rests[k].i]++
		total++
	}
	out := make([]string, len(shares))
	for i, h := range hundredths {
		out[i] = strconv.FormatFloat(float64(h)/100, 'f', -1, 64)
	}
	return out
}
