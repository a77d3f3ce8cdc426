package provider_test

import (
	"context"
	"testing"

	"github.com/open-feature/go-sdk/openfeature"
)

// TestIntegerNotations: a bucket whose value is written 10.0 or 1e1 is the
// integer 10 through the SDK, as the OFREP and JavaScript providers read
// it; 10.5 is a TYPE_MISMATCH still.
func TestIntegerNotations(t *testing.T) {
	s, _, _, _ := start(t)
	for key, value := range map[string]string{"int-dot": "10.0", "int-exp": "1e1", "int-frac": "10.5"} {
		s.Create(t, testFeature(key, true, "", value))
	}
	c := newClientOf(t, s)
	of := sdkOver(t, c)
	ctx := context.Background()
	ec := openfeature.NewEvaluationContext("u1", nil)
	for _, key := range []string{"int-dot", "int-exp"} {
		if got, err := of.IntValueDetails(ctx, key, -1, ec); err != nil || got.Value != 10 {
			t.Errorf("%s as an integer = %+v, %v; want 10", key, got, err)
		}
	}
	if got, err := of.IntValueDetails(ctx, "int-frac", -1, ec); err == nil || got.ErrorCode != openfeature.TypeMismatchCode || got.Value != -1 {
		t.Errorf("int-frac as an integer = %+v, %v; want the default and TYPE_MISMATCH", got, err)
	}
}

// TestIntegerNotationsKept: the server keeps the notation (the test above
// would prove nothing if it served 10).
func TestIntegerNotationsKept(t *testing.T) {
	s, _, _, _ := start(t)
	s.Create(t, testFeature("int-exp", true, "", "1e1"))
	c := newClientOf(t, s)
	if e, err := c.Evaluate("int-exp", "u1"); err != nil || string(e.Value) != "1e1" {
		t.Fatalf("int-exp serves %s, %v; want 1e1 as written", e.Value, err)
	}
}
