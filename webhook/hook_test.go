package webhook

import (
	"strings"
	"testing"

	"github.com/rollout/rollout/rollout/audit"
)

// TestTextNamesEnvironment: a webhook's line says which environment a
// change was made in, unless production (as before environments).
func TestTextNamesEnvironment(t *testing.T) {
	e := audit.Event{Actor: "ann", Kind: audit.Change, Feature: "checkout", Version: 3, Summary: "on 50 % → 60 %", Environment: "staging"}
	if got, want := Text(e), "ann change checkout (version 3) in staging: on 50 % → 60 %"; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
	e.Environment = "production"
	if got := Text(e); strings.Contains(got, " in production") {
		t.Errorf("Text = %q: production goes unsaid", got)
	}
}
