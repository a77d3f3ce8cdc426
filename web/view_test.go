package web

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rollout/rollout/rollout/feature"
)

func TestPct(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0.00%"},
		{0.00001, "<0.01%"},
		{0.00005, "0.01%"},
		{0.2226766, "22.27%"},
		{0.0825, "8.25%"},
		{0.99994, "99.99%"},
		{0.99996, ">99.99%"},
		{1, "100.00%"},
	}
	for _, tt := range tests {
		if got := pct(tt.in); got != tt.want {
			t.Errorf("pct(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestDirection(t *testing.T) {
	tests := []struct {
		name  string
		moves []feature.Move
		want  string
	}{
		{"none", nil, ""},
		{"into one", []feature.Move{{From: "B", To: "D"}, {From: "A", To: "D"}}, "all into D"},
		{"out of one", []feature.Move{{From: "D", To: "B"}, {From: "D", To: "A"}}, "all out of D"},
		{"one move", []feature.Move{{From: "D", To: "B"}}, "all into B"},
		{"turned off", []feature.Move{{From: "A", To: ""}, {From: "B", To: ""}}, "all to no bucket (apps serve their default)"},
		{"created", []feature.Move{{From: "", To: "A"}, {From: "", To: "B"}}, "all from no bucket"},
		{"mixed", []feature.Move{{From: "A", To: "B"}, {From: "B", To: "C"}}, ""},
	}
	for _, tt := range tests {
		if got := direction(tt.moves); got != tt.want {
			t.Errorf("%s: direction(%v) = %q, want %q", tt.name, tt.moves, got, tt.want)
		}
	}
}

func TestNewBar(t *testing.T) {
	shares := map[string]float64{"A": 0.0825, "B": 0.6478, "C": 0.2697}
	got := newBar([]string{"A", "B", "C"}, shares, map[string]int{"A": 0, "B": 1, "C": 2})
	want := shareBar{Segments: []segment{
		{Name: "A", Share: 0.0825, X: 0, W: 8.25, Color: 0, Label: true},
		{Name: "B", Share: 0.6478, X: 8.25, W: 64.78, Color: 1, Label: true},
		{Name: "C", Share: 0.2697, X: 73.03, W: 26.97, Color: 2, Label: true},
	}}
	approx := cmp.Comparer(func(x, y float64) bool { return math.Abs(x-y) < 1e-9 })
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("newBar mismatch (-want +got):\n%s", diff)
	}
	if got, want := got.AriaLabel(), "Shares of users: A 8.25%, B 64.78%, C 26.97%"; got != want {
		t.Errorf("AriaLabel() = %q, want %q", got, want)
	}
}

func TestNewChart(t *testing.T) {
	versions := []versionView{
		{Version: 3, Churn: 0.2226766, Modulo: 0.75, Exact: true},
		{Version: 2, Churn: 0, Modulo: 0, Exact: true},
		{Version: 1, Created: true, Churn: 1, Modulo: 1},
	}
	c := newChart(versions)
	if len(c.Rows) != 2 || c.Rows[0].Version != 3 || c.Rows[1].Version != 2 {
		t.Fatalf("chart rows = %+v, want versions 3 and 2 (the creation left out)", c.Rows)
	}
	r := c.Rows[0]
	if math.Abs(r.ChurnW-chartBarScale*0.2226766) > 1e-9 || math.Abs(r.ModuloW-chartBarScale*0.75) > 1e-9 {
		t.Errorf("row widths = %v, %v; want to scale", r.ChurnW, r.ModuloW)
	}
	if r.ChurnX <= chartLabelCol+r.ChurnW || r.ModuloX <= chartLabelCol+r.ModuloW {
		t.Errorf("labels at %v, %v overlap their bars", r.ChurnX, r.ModuloX)
	}
	if c.Height != chartTop+2*chartRowHeight+4 {
		t.Errorf("height = %d", c.Height)
	}
}
