package provider_test

import (
	"encoding/json"
	"testing"

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
