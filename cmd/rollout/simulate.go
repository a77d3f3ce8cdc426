package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/rollout/rollout/ring"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// runSimulate is `rollout simulate`: it builds a ring, makes one change to it
// (add, remove or resize a bucket), assigns the users prefix+"0",
// prefix+"1", … before and after, and prints the counts beside the exact
// shares and churn of package ring, and beside what naive modulo assignment
// would move. It writes the report, and flag errors and usage, to stdout. It
// returns an error for bad flags (flag.ErrHelp for -h) and never panics on
// them.
func runSimulate(args []string, stdout io.Writer) error {
	sim, err := parseSimulate(args, stdout)
	if err != nil {
		return err
	}
	if sim.plan != nil {
		sim.reportPlan(stdout)
		return nil
	}
	sim.count()
	// The report compares with modulo only when the change adds or removes a
	// bucket with replicas.
	changesN := !slices.Equal(moduloNames(sim.before), moduloNames(sim.after))
	if saved := sim.moduloMoved - sim.totalMoved; changesN && saved < 0 {
		return fmt.Errorf("%s: over only %d keys, consistent hashing happened to move %d users and naive modulo %d: "+
			"give more --keys for a meaningful count", sim.change, sim.keys, sim.totalMoved, sim.moduloMoved)
	}
	sim.report(stdout)
	return nil
}

// simulation is one run of the simulate command.
type simulation struct {
	keys          int
	prefix        string
	change        string // what the change does, in words
	before, after *ring.Ring
	plan          *plan.Plan // --target: the plan, and no counting

	// Counted over the keys:
	usersBefore, usersAfter map[string]int
	moved                   map[ring.Move]int // by From and To; Share is 0
	totalMoved              int
	moduloMoved             int // by naive modulo assignment
}

var simulateSynopsis = fmt.Sprintf(`usage: rollout simulate [flags]

Shows which users one change to a ring moves: counted over the keys, exactly
from the ring's arcs, and beside naive modulo assignment. Make one change:
--add (the default, adding D), --remove or --set. The rings obey a feature's
limits: 1 to %d replicas a bucket, at most %d buckets and %d points.
`, feature.MaxReplicas, feature.MaxBuckets, feature.MaxPoints)

func parseSimulate(args []string, stdout io.Writer) (*simulation, error) {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	keys := fs.Int("keys", 1_000_000, "number of users; their keys are the prefix and 0, 1, 2, …")
	prefix := fs.String("prefix", "user:", "prefix of the user keys")
	bucketList := fs.String("buckets", "A,B,C", "comma-separated bucket `NAMES` of the ring before the change")
	replicas := fs.Int("replicas", 3, "replicas of each bucket, and of an added one")
	add := fs.String("add", "D", "add the bucket `NAME`")
	remove := fs.String("remove", "", "remove the bucket `NAME`")
	set := fs.String("set", "", "set the replicas of a bucket: `NAME=REPLICAS`")
	target := fs.String("target", "", "plan the replicas for target shares instead: `NAME=SHARE,…` (such as on=0.1,off=0.9; 0 removes a bucket)")
	tolerance := fs.Float64("tolerance", plan.DefaultTolerance, "with --target, how far each share may miss its target")
	budget := fs.Int64("budget", plan.DefaultBudget, "with --target, the most search `STEPS` the plan takes (a replica added or removed each) before it answers the best found so far")
	rest, err := parseFlags(fs, simulateSynopsis, args, stdout)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("simulate takes no arguments, got %q", rest)
	}
	if *keys < 1 {
		return nil, fmt.Errorf("--keys %d: want at least 1", *keys)
	}
	if *budget < 1 {
		return nil, fmt.Errorf("--budget %d: want at least 1 step", *budget)
	}
	if *replicas < 1 || *replicas > feature.MaxReplicas {
		return nil, fmt.Errorf("--replicas %d: a bucket has 1 to %d replicas", *replicas, feature.MaxReplicas)
	}
	var changes []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "add" || f.Name == "remove" || f.Name == "set" || f.Name == "target" {
			changes = append(changes, "--"+f.Name)
		}
	})
	if len(changes) > 1 {
		return nil, fmt.Errorf("make one change, not %s", strings.Join(changes, " and "))
	}

	var buckets []ring.Bucket
	for name := range strings.SplitSeq(*bucketList, ",") {
		buckets = append(buckets, ring.Bucket{Name: strings.TrimSpace(name), Replicas: *replicas})
	}
	before, err := ring.New(buckets...)
	if err != nil {
		return nil, fmt.Errorf("--buckets %q --replicas %d: %w", *bucketList, *replicas, err)
	}

	sim := &simulation{keys: *keys, prefix: *prefix, before: before}
	if len(changes) == 1 && changes[0] == "--target" {
		targets, err := parseTargets(*target)
		if err != nil {
			return nil, err
		}
		if err := plan.CheckTolerance(*tolerance); err != nil {
			return nil, fmt.Errorf("--tolerance: %w", err) // 0 too: the default is given
		}
		var current []feature.Bucket
		for _, b := range buckets {
			current = append(current, feature.Bucket{Name: b.Name, Replicas: b.Replicas})
		}
		p, err := plan.For(current, targets, plan.Options{Tolerance: *tolerance, Budget: *budget})
		if err != nil {
			return nil, fmt.Errorf("--target %q: %w", *target, err)
		}
		sim.plan = &p
		return sim, nil
	}
	var change ring.Bucket
	switch {
	case len(changes) == 0 || changes[0] == "--add":
		change = ring.Bucket{Name: *add, Replicas: *replicas}
		if _, ok := replicasOf(before, *add); ok {
			return nil, fmt.Errorf("--add %q: the ring has it already (use --set)", *add)
		}
		sim.change = fmt.Sprintf("add %s with %d replicas", *add, *replicas)
	case changes[0] == "--remove":
		if _, ok := replicasOf(before, *remove); !ok {
			return nil, fmt.Errorf("--remove %q: no such bucket in %s", *remove, *bucketList)
		}
		sim.after = before.Without(*remove)
		sim.change = "remove " + *remove
	case changes[0] == "--set":
		name, value, ok := strings.Cut(*set, "=")
		n, err := strconv.Atoi(value)
		if !ok || err != nil {
			return nil, fmt.Errorf("--set %q: want NAME=REPLICAS", *set)
		}
		if n < 1 || n > feature.MaxReplicas {
			return nil, fmt.Errorf("--set %q: a bucket has 1 to %d replicas (--remove takes one out)", *set, feature.MaxReplicas)
		}
		old, ok := replicasOf(before, name)
		if !ok {
			return nil, fmt.Errorf("--set %q: no bucket %q in %s (use --add)", *set, name, *bucketList)
		}
		change = ring.Bucket{Name: name, Replicas: n}
		sim.change = fmt.Sprintf("set %s from %d to %d replicas", name, old, n)
	}
	if sim.after == nil {
		if sim.after, err = before.With(change); err != nil {
			return nil, fmt.Errorf("%s: %w", sim.change, err)
		}
	}
	if err := checkDomain(before, sim.after); err != nil {
		return nil, fmt.Errorf("%s: %w", sim.change, err)
	}
	churn, modulo := ring.ChurnBetween(before, sim.after).Total, ring.ModuloChurn(before, sim.after)
	if !slices.Equal(moduloNames(before), moduloNames(sim.after)) && modulo < churn {
		return nil, fmt.Errorf("%s: consistent hashing would move %s of users, more than naive modulo's %s, "+
			"which would print negative savings: with few replicas the ring's shares are far from even "+
			"(more --replicas even them out)", sim.change, percent(churn), percent(modulo))
	}
	return sim, nil
}

// checkDomain refuses rings a feature could not have (replicas from 1 to
// feature.MaxReplicas, at most feature.MaxBuckets buckets and
// feature.MaxPoints points, valid names), and changes whose report says
// nothing: both rings need a bucket, and one of them two.
func checkDomain(before, after *ring.Ring) error {
	for _, r := range []*ring.Ring{before, after} {
		f := feature.Feature{Key: "simulate"}
		for _, b := range r.Buckets() {
			f.Buckets = append(f.Buckets, feature.Bucket{Name: b.Name, Replicas: b.Replicas})
		}
		if len(f.Buckets) == 0 {
			return errors.New("a ring with no bucket serves no one: give at least one bucket before and after the change")
		}
		if err := f.Validate(); err != nil {
			return errors.New(feature.ErrorMessage(err)) // not "invalid: …"
		}
	}
	if len(before.Buckets()) < 2 && len(after.Buckets()) < 2 {
		return errors.New("with one bucket before and after, every user stays in it: give at least two buckets (--buckets A,B)")
	}
	return nil
}

// replicasOf returns the replicas of the named bucket of r.
func replicasOf(r *ring.Ring, name string) (int, bool) {
	for _, b := range r.Buckets() {
		if b.Name == name {
			return b.Replicas, true
		}
	}
	return 0, false
}

// count assigns every key before and after the change, on the ring and by
// naive modulo assignment.
func (s *simulation) count() {
	s.usersBefore, s.usersAfter = map[string]int{}, map[string]int{}
	s.moved = map[ring.Move]int{}
	modBefore, modAfter := moduloNames(s.before), moduloNames(s.after)
	buf := make([]byte, 0, len(s.prefix)+20)
	for i := range s.keys {
		buf = strconv.AppendInt(append(buf[:0], s.prefix...), int64(i), 10)
		h := ring.HashBytes(buf)
		from, _ := s.before.LookupPosition(h)
		to, _ := s.after.LookupPosition(h)
		s.usersBefore[from]++
		s.usersAfter[to]++
		if from != to {
			s.moved[ring.Move{From: from, To: to}]++
			s.totalMoved++
		}
		if moduloOwner(modBefore, h) != moduloOwner(modAfter, h) {
			s.moduloMoved++
		}
	}
}

// moduloNames returns the names naive modulo assignment picks from, as
// ring.ModuloChurn defines it: the buckets with replicas, sorted by name.
func moduloNames(r *ring.Ring) []string {
	var names []string
	for _, b := range r.Buckets() { // sorted by name
		if b.Replicas > 0 {
			names = append(names, b.Name)
		}
	}
	return names
}

// moduloOwner returns names[h mod len(names)], or "" for no names.
func moduloOwner(names []string, h ring.Position) string {
	if len(names) == 0 {
		return ""
	}
	return names[bits.Rem64(h.Hi, h.Lo, uint64(len(names)))]
}

func (s *simulation) report(w io.Writer) {
	fmt.Fprintf(w, "Ring before: %s\n", describeRing(s.before))
	fmt.Fprintf(w, "Change:      %s\n", s.change)
	fmt.Fprintf(w, "Ring after:  %s\n", describeRing(s.after))
	fmt.Fprintf(w, "Users:       %s keys, %q to %q\n\n", thousands(s.keys), s.prefix+"0", s.prefix+strconv.Itoa(s.keys-1))

	// Every bucket of either ring, in name order: after's buckets are
	// before's with one added or removed.
	var names []string
	for _, b := range append(s.before.Buckets(), s.after.Buckets()...) {
		names = append(names, b.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	sharesBefore, sharesAfter := s.before.Shares(), s.after.Shares()
	t := &textTable{}
	t.add("bucket", "users before", "counted", "exact", "users after", "counted", "exact")
	for _, name := range names {
		t.add(name,
			thousands(s.usersBefore[name]), s.percent(s.usersBefore[name]), percent(sharesBefore[name]),
			thousands(s.usersAfter[name]), s.percent(s.usersAfter[name]), percent(sharesAfter[name]))
	}
	if n := s.usersBefore[""] + s.usersAfter[""]; n > 0 { // a ring with no points
		t.add("(none)",
			thousands(s.usersBefore[""]), s.percent(s.usersBefore[""]), "",
			thousands(s.usersAfter[""]), s.percent(s.usersAfter[""]), "")
	}
	t.add("all", thousands(s.keys), s.percent(s.keys), "", thousands(s.keys), s.percent(s.keys), "")
	t.write(w)
	fmt.Fprintln(w)

	churn := ring.ChurnBetween(s.before, s.after)
	t = &textTable{}
	t.add("move", "users", "counted", "exact")
	for _, m := range churn.Moves {
		k := ring.Move{From: m.From, To: m.To}
		t.add(orNone(m.From)+" -> "+orNone(m.To), thousands(s.moved[k]), s.percent(s.moved[k]), percent(m.Share))
		delete(s.moved, k)
	}
	for k, n := range s.moved { // none: a counted move lies on an arc that moves
		t.add(orNone(k.From)+" -> "+orNone(k.To), thousands(n), s.percent(n), percent(0))
	}
	t.add("all moves", thousands(s.totalMoved), s.percent(s.totalMoved), percent(churn.Total))
	t.write(w)
	fmt.Fprintln(w)

	if slices.Equal(moduloNames(s.before), moduloNames(s.after)) {
		fmt.Fprintf(w, "Naive modulo assignment (hash mod N) gives each bucket 1/N of users whatever its\n"+
			"replicas, so it cannot make this change; consistent hashing makes it by moving %s.\n",
			percent(churn.Total))
		return
	}
	modulo := ring.ModuloChurn(s.before, s.after)
	t = &textTable{}
	t.add("users who change bucket", "users", "counted", "exact")
	t.add("consistent hashing", thousands(s.totalMoved), s.percent(s.totalMoved), percent(churn.Total))
	t.add("naive modulo (hash mod N)", thousands(s.moduloMoved), s.percent(s.moduloMoved), percent(modulo))
	saved := s.moduloMoved - s.totalMoved
	t.add("saved by consistent hashing", thousands(saved), s.percent(saved), percent(modulo-churn.Total))
	t.write(w)
	fmt.Fprintf(w, "\nNaive modulo assignment would move %s of users; consistent hashing moves %s,\n"+
		"so it spares %s of users (%s of these %s) a change of bucket.\n",
		percent(modulo), percent(churn.Total), percent(modulo-churn.Total), thousands(saved), thousands(s.keys))
}

// describeRing returns e.g. "A×3, B×3, C×3 (9 points)".
func describeRing(r *ring.Ring) string {
	var parts []string
	for _, b := range r.Buckets() {
		parts = append(parts, fmt.Sprintf("%s×%d", b.Name, b.Replicas))
	}
	if len(parts) == 0 {
		parts = []string{"no buckets"}
	}
	return fmt.Sprintf("%s (%d points)", strings.Join(parts, ", "), r.Len())
}

func orNone(name string) string {
	if name == "" {
		return "(none)"
	}
	return name
}

// percent formats a fraction of users.
func percent(f float64) string { return strconv.FormatFloat(100*f, 'f', 3, 64) + "%" }

// percent formats a count as a fraction of the keys.
func (s *simulation) percent(n int) string { return percent(float64(n) / float64(s.keys)) }

// thousands formats n with comma separators: 1234567 is "1,234,567".
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// textTable prints rows with the first column aligned left and the others
// right, two spaces apart.
type textTable struct{ rows [][]string }

func (t *textTable) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *textTable) write(w io.Writer) {
	var widths []int
	for _, row := range t.rows {
		for i, c := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, row := range t.rows {
		var b strings.Builder
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// parseTargets reads NAME=SHARE,… into target shares.
func parseTargets(list string) (map[string]float64, error) {
	targets := map[string]float64{}
	for part := range strings.SplitSeq(list, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		share, err := strconv.ParseFloat(value, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("--target %q: want NAME=SHARE,… such as on=0.1,off=0.9", list)
		}
		if _, dup := targets[name]; dup {
			return nil, fmt.Errorf("--target %q: %s is given twice", list, name)
		}
		targets[name] = share
	}
	return targets, nil
}

// reportPlan prints the plan for --target: its buckets, each share now,
// targeted and planned, and the churn beside its lower bound.
func (s *simulation) reportPlan(w io.Writer) {
	p := s.plan
	var parts []string
	points := 0
	for _, b := range p.Buckets {
		parts = append(parts, fmt.Sprintf("%s×%d", b.Name, b.Replicas))
		points += b.Replicas
	}
	fmt.Fprintf(w, "Ring before: %s\n", describeRing(s.before))
	fmt.Fprintf(w, "Plan:        %s (%d points)\n", strings.Join(parts, ", "), points)
	fmt.Fprintf(w, "Tolerance:   %s per bucket\n\n", percent(p.Tolerance))

	before := s.before.Shares()
	t := &textTable{}
	t.add("bucket", "replicas before", "share before", "target", "replicas after", "share after", "error")
	for _, name := range slices.Sorted(maps.Keys(p.Targets)) {
		old, _ := replicasOf(s.before, name)
		var after int
		for _, b := range p.Buckets {
			if b.Name == name {
				after = b.Replicas
			}
		}
		t.add(name, strconv.Itoa(old), percent(before[name]), percent(p.Targets[name]),
			strconv.Itoa(after), percent(p.SharesAfter[name]), percent(p.SharesAfter[name]-p.Targets[name]))
	}
	t.write(w)
	fmt.Fprintln(w)
	within := "yes"
	switch {
	case !p.WithinTolerance && p.CutShort:
		within = "no: the search was cut short before it reached it; this is the closest plan found"
	case !p.WithinTolerance:
		within = "no: no replica counts within the limits reach it; this is the closest plan found"
	}
	fmt.Fprintf(w, "Within tolerance: %s (max error %s)\n", within, percent(p.MaxError))
	if p.CutShort {
		fmt.Fprintf(w, "Cut short:        yes, after %d search steps (%s): the best plan found so far; a larger --budget searches further\n", p.Steps, p.CutReason)
	}
	fmt.Fprintf(w, "Churn:            %s of users move\n", percent(p.Churn))
	fmt.Fprintf(w, "Lower bound:      %s (half the sum of |share before - target|)\n", percent(p.LowerBound))
}
