package provider_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/open-feature/go-sdk/openfeature"

	"github.com/rollout/rollout/api/client/provider"
)

// TestJSONInt: every notation of an integer is that integer, exactly; a
// fraction, a value beyond an int64 or what is not a JSON number is not.
func TestJSONInt(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"10", 10, true}, {"10.0", 10, true}, {"1e1", 10, true}, {"1E+1", 10, true}, {"100e-1", 10, true},
		{"-0.5e1", -5, true}, {"-0", 0, true}, {"0.0", 0, true}, {"0e999999999999999999", 0, true},
		{"9007199254740993.0", 9007199254740993, true}, {"9223372036854775807.000", 9223372036854775807, true},
		{"-9223372036854775808.0", -9223372036854775808, true}, {"-92233720368547758.08e2", -9223372036854775808, true},
		{"9223372036854775808.0", 0, false}, {"1e19", 0, false}, {"1e1000000000", 0, false},
		{"1e99999999999999999999", 0, false}, {"1e-99999999999999999999", 0, false},
		{"10.5", 0, false}, {"1e-1", 0, false}, {"0.1e1", 1, true}, {"0.01e1", 0, false},
		{`"10"`, 0, false}, {"true", 0, false}, {"null", 0, false}, {"[10]", 0, false},
		{"0x10", 0, false}, {"1_000", 0, false}, {"Inf", 0, false}, {"+1", 0, false}, {"01.0", 0, false},
	} {
		got, ok := provider.JSONInt(json.RawMessage(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("jsonInt(%s) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

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
