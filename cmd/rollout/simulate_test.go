package main

import (
	"bytes"
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"
)

// simulate runs the simulate command and returns what it printed.
func simulate(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := runSimulate(args, &out); err != nil {
		t.Fatalf("runSimulate(%q): %v\n%s", args, err, out.String())
	}
	return out.String()
}

var cellGap = regexp.MustCompile(`\s{2,}`)

// row returns the cells of the table row whose first cell is label.
func row(t *testing.T, out, label string) []string {
	t.Helper()
	for line := range strings.Lines(out) {
		if cells := cellGap.Split(strings.TrimSpace(line), -1); cells[0] == label {
			return cells
		}
	}
	t.Fatalf("no row %q in:\n%s", label, out)
	return nil
}

// checkRow fails unless the row labelled label holds want after its label.
func checkRow(t *testing.T, out, label string, want ...string) {
	t.Helper()
	got := row(t, out, label)[1:]
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Errorf("row %q = %q, want %q", label, got, want)
	}
}

func TestSimulateSeedExample(t *testing.T) {
	out := simulate(t, "--keys", "20000")
	for _, want := range []string{
		"Ring before: A×3, B×3, C×3 (9 points)",
		"Change:      add D with 3 replicas",
		"Ring after:  A×3, B×3, C×3, D×3 (12 points)",
		`Users:       20,000 keys, "user:0" to "user:19999"`,
		"Naive modulo assignment would move 75.000% of users; consistent hashing moves 22.268%",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	//          users before, counted, exact, users after, counted, exact
	checkRow(t, out, "A", "1,687", "8.435%", "8.252%", "1,335", "6.675%", "6.400%")
	checkRow(t, out, "B", "12,939", "64.695%", "64.779%", "10,668", "53.340%", "53.273%")
	checkRow(t, out, "C", "5,374", "26.870%", "26.970%", "3,609", "18.045%", "18.059%")
	checkRow(t, out, "D", "0", "0.000%", "0.000%", "4,388", "21.940%", "22.268%")
	//                   users, counted, exact
	checkRow(t, out, "B -> D", "2,271", "11.355%", "11.506%")
	checkRow(t, out, "C -> D", "1,765", "8.825%", "8.910%")
	checkRow(t, out, "A -> D", "352", "1.760%", "1.851%")
	checkRow(t, out, "all moves", "4,388", "21.940%", "22.268%")
	checkRow(t, out, "naive modulo (hash mod N)", "14,988", "74.940%", "75.000%")
	checkRow(t, out, "saved by consistent hashing", "10,600", "53.000%", "52.732%")
}

// TestSimulateSeedCounts is the seed demo's million users: the counts must
// be those of the reference ring.
func TestSimulateSeedCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("counts a million keys")
	}
	out := simulate(t)
	checkRow(t, out, "A", "82,568", "8.257%", "8.252%", "63,958", "6.396%", "6.400%")
	checkRow(t, out, "B", "647,631", "64.763%", "64.779%", "532,376", "53.238%", "53.273%")
	checkRow(t, out, "C", "269,801", "26.980%", "26.970%", "180,927", "18.093%", "18.059%")
	checkRow(t, out, "all moves", "222,739", "22.274%", "22.268%")
}

func TestSimulateChanges(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		change string
		moves  []string // every move row, largest first
		total  string   // exact churn
		modulo string   // the closing comparison, or what replaces it
	}{
		{
			name:   "remove",
			args:   []string{"--remove", "B"},
			change: "remove B",
			moves:  []string{"B -> C", "B -> A"},
			total:  "64.779%",
			modulo: "Naive modulo assignment would move 66.667% of users",
		},
		{
			name:   "grow",
			args:   []string{"--set", "A=10"},
			change: "set A from 3 to 10 replicas",
			moves:  []string{"B -> A", "C -> A"},
			total:  "38.357%",
			modulo: "so it cannot make this change; consistent hashing makes it by moving 38.357%.",
		},
		{
			name:   "shrink to one replica",
			args:   []string{"--set", "B=1"},
			change: "set B from 3 to 1 replicas",
			moves:  []string{"B -> A"},
			total:  "7.973%",
			modulo: "so it cannot make this change",
		},
		{
			name:   "from one bucket to two",
			args:   []string{"--buckets", "A", "--add", "E"},
			change: "add E with 3 replicas",
			moves:  []string{"A -> E"},
			total:  "43.228%",
			modulo: "Naive modulo assignment would move 50.000% of users",
		},
		{
			name:   "remove down to one bucket",
			args:   []string{"--buckets", "A,E", "--remove", "E"},
			change: "remove E",
			moves:  []string{"E -> A"},
			total:  "43.228%",
			modulo: "Naive modulo assignment would move 50.000% of users",
		},
		{
			name:   "other buckets and prefix",
			args:   []string{"--buckets", "red, green", "--replicas", "50", "--add", "blue", "--prefix", "visitor-"},
			change: "add blue with 50 replicas",
			moves:  []string{"red -> blue", "green -> blue"},
			total:  "40.176%",
			modulo: "Naive modulo assignment would move 66.667% of users",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := simulate(t, append([]string{"--keys", "20000"}, tt.args...)...)
			if want := "Change:      " + tt.change + "\n"; !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
			var moves []string
			for line := range strings.Lines(out) {
				if label := cellGap.Split(line, 2)[0]; strings.Contains(label, " -> ") {
					moves = append(moves, label)
				}
			}
			if strings.Join(moves, ", ") != strings.Join(tt.moves, ", ") {
				t.Errorf("moves = %q, want %q", moves, tt.moves)
			}
			if got := row(t, out, "all moves")[3]; got != tt.total {
				t.Errorf("exact churn = %s, want %s", got, tt.total)
			}
			if !strings.Contains(out, tt.modulo) {
				t.Errorf("output lacks %q:\n%s", tt.modulo, out)
			}
		})
	}
}

func TestSimulateRefusesBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string // in the error
	}{
		{[]string{"--set", "A"}, "want NAME=REPLICAS"},
		{[]string{"--set", "A=x"}, "want NAME=REPLICAS"},
		{[]string{"--set", "A=-1"}, "a bucket has 1 to 20000 replicas"},
		{[]string{"--set", "A=0"}, "--remove takes one out"},
		{[]string{"--set", "A=20001"}, "a bucket has 1 to 20000 replicas"},
		{[]string{"--replicas", "0"}, "--replicas 0: a bucket has 1 to 20000 replicas"},
		{[]string{"--replicas", "20001"}, "--replicas 20001: a bucket has 1 to 20000 replicas"},
		{[]string{"--buckets", "A", "--remove", "A"}, "a ring with no bucket serves no one"},
		{[]string{"--buckets", "A", "--set", "A=5"}, "give at least two buckets"},
		{[]string{"--buckets", "A,B,C,E,F,G,H,I,J,K", "--replicas", "2001"}, "at most 20000 ring points"},
		{[]string{"--add", "D/1"}, "bucket name \"D/1\" is invalid"},
		// B would take 64.8 % of users, more than modulo's 50 %.
		{[]string{"--buckets", "A", "--add", "B"}, "which would print negative savings"},
		{[]string{"--buckets", "A,B", "--remove", "B"}, "which would print negative savings"},
		// The one user "p17-0" moves to D on the ring but not by modulo.
		{[]string{"--keys", "1", "--prefix", "p17-"}, "give more --keys"},
		{[]string{"--set", "Z=3"}, `no bucket "Z"`},
		{[]string{"--remove", "Z"}, "no such bucket"},
		{[]string{"--add", "A"}, "has it already"},
		{[]string{"--add", "X#1"}, "contains '#'"},
		{[]string{"--add", ""}, "empty bucket name"},
		{[]string{"--add", "D", "--remove", "B"}, "make one change, not --add and --remove"},
		{[]string{"--set", "A=4", "--remove", "B"}, "make one change"},
		{[]string{"--keys", "0"}, "want at least 1"},
		{[]string{"--keys", "many"}, "invalid value"},
		{[]string{"--buckets", "A,,B"}, "empty bucket name"},
		{[]string{"--buckets", "A,B,A"}, "duplicate bucket"},
		{[]string{"--replicas", "-1"}, "a bucket has 1 to 20000 replicas"},
		{[]string{"--bogus"}, "not defined"},
		{[]string{"extra"}, "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := runSimulate(append([]string{"--keys", "10"}, tt.args...), &out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("runSimulate(%q) error = %v, want one containing %q", tt.args, err, tt.want)
			}
			if strings.Contains(out.String(), "saved by") {
				t.Errorf("runSimulate(%q) printed a report:\n%s", tt.args, &out)
			}
		})
	}

	var out bytes.Buffer
	if err := runSimulate([]string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("runSimulate(-h) error = %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(out.String(), "usage: rollout simulate") {
		t.Errorf("runSimulate(-h) printed %q, want the usage", out.String())
	}
}

// TestSimulateTarget plans on/off 100/100 to 10 % / 90 %: the plan, its
// shares within half a point, churn no more than the 34.6 % and
// the lower bound of 35.0 %.
func TestSimulateTarget(t *testing.T) {
	out := simulate(t, "--buckets", "on,off", "--replicas", "100", "--target", "on=0.1,off=0.9")
	for _, want := range []string{
		"Ring before: off×100, on×100 (200 points)",
		"Plan:        on×17, off×118 (135 points)",
		"Within tolerance: yes",
		"Churn:            34.533% of users move",
		"Lower bound:      35.032%",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	//                    replicas before, share before, target, replicas after, share after, error
	checkRow(t, out, "on", "100", "45.032%", "10.000%", "17", "10.500%", "0.500%")
	checkRow(t, out, "off", "100", "54.968%", "90.000%", "118", "89.500%", "-0.500%")
}

func TestSimulateTargetRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"--target", "A=0.5,B=0.4,C=0.2"},
		{"--target", "A=half"},
		{"--target", "A=1"},
		{"--target", "A=1,B=0,C=0,A=0"},
		{"--target", "A=1,B=0,C=0", "--add", "D"},
		{"--target", "A=1,B=0,C=0", "--tolerance", "-1"},
		{"--target", "A=1,B=0,C=0", "--tolerance", "1e-9"},
		{"--target", "A=1,B=0,C=0", "--tolerance", "1"},
		{"--target", "A=1,B=0,C=0", "--tolerance", "0"},
		{"--target", "A=1,B=0,C=0", "--budget", "0"},
	} {
		var out bytes.Buffer
		if err := runSimulate(args, &out); err == nil {
			t.Errorf("runSimulate(%q) = nil error:\n%s", args, out.String())
		}
	}
}

// TestSimulateTargetBudget: a plan whose search its --budget cuts short
// says so, with the best plan found.
func TestSimulateTargetBudget(t *testing.T) {
	out := simulate(t, "--buckets", "A,B,C,D", "--replicas", "100", "--target", "A=0.1,B=0.2,C=0.3,D=0.4", "--tolerance", "0.000001", "--budget", "1000")
	for _, want := range []string{
		"Within tolerance: no: the search was cut short before it reached it",
		"Cut short:        yes, after 1",
		"(budget): the best plan found so far; a larger --budget searches further",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if out := simulate(t, "--buckets", "on,off", "--replicas", "100", "--target", "on=0.1,off=0.9"); strings.Contains(out, "Cut short") {
		t.Errorf("a whole plan says it was cut short:\n%s", out)
	}
}
