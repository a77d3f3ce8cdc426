package feature_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rollout/rollout/rollout/feature"
)

// TestErrorContract: ErrorCode and ErrorMessage read an *Error, bare or
// wrapped, by its code and message; another error is internal and says
// what it says; no error has no code and no message.
func TestErrorContract(t *testing.T) {
	conflict := feature.Errorf(feature.EConflict, "feature %q already exists", "f")
	tests := []struct {
		name          string
		err           error
		code, message string
	}{
		{"nil", nil, "", ""},
		{"bare", conflict, feature.EConflict, `feature "f" already exists`},
		{"wrapped", fmt.Errorf("create: %w", conflict), feature.EConflict, `feature "f" already exists`},
		{"joined", errors.Join(conflict, errors.New("reload failed")), feature.EConflict, `feature "f" already exists`},
		{"other", errors.New("disk on fire"), feature.EInternal, "disk on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := feature.ErrorCode(tt.err); got != tt.code {
				t.Errorf("ErrorCode(%v) = %q, want %q", tt.err, got, tt.code)
			}
			if got := feature.ErrorMessage(tt.err); got != tt.message {
				t.Errorf("ErrorMessage(%v) = %q, want %q", tt.err, got, tt.message)
			}
		})
	}
}
