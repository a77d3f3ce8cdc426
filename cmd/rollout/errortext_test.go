package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rollout/rollout/rollout/feature"
)

// TestErrorText: the command line prints a domain error without its code,
// bare or wrapped in the context (and advice) the command put around it,
// and any other error as it is.
func TestErrorText(t *testing.T) {
	busy := feature.Errorf(feature.EUnavailable, "the database is busy: try again shortly")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"bare", feature.Errorf(feature.EInvalid, "bad name"), "bad name"},
		{"wrapped", fmt.Errorf("migrate a to b: %w; b may be partly written", busy), "migrate a to b: the database is busy: try again shortly; b may be partly written"},
		{"other", errors.New("flag provided but not defined: -x"), "flag provided but not defined: -x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorText(tt.err); got != tt.want {
				t.Errorf("errorText(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
