package evaluation

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/rollout/rollout/api/internal/jsonscan"
	"github.com/rollout/rollout/rollout/feature"
)

func repeats(body []byte) bool {
	_, ok := jsonscan.RepeatedKey(body)
	return ok
}

// referenceParse is parseOFREP done the plain way, by decoding into maps of
// raw values: the fuzz test holds the fast parser to it. Repeated keys are
// jsonscan.RepeatedKey's, which its own fuzz test holds to encoding/json's
// tokens.
func referenceParse(body []byte, key string) (user string, flags *[]string, code string) {
	trimmed := bytes.Trim(body, " \t\r\n")
	if len(trimmed) == 0 {
		return "", nil, OFREPTargetingKeyMissing
	}
	var top map[string]json.RawMessage
	if !json.Valid(body) || trimmed[0] != '{' || json.Unmarshal(body, &top) != nil || repeats(body) {
		return "", nil, OFREPParseError
	}
	ctx, ok := top["context"]
	if !ok || string(ctx) == "null" {
		return "", nil, OFREPTargetingKeyMissing
	}
	var c map[string]json.RawMessage
	if ctx[0] != '{' || json.Unmarshal(ctx, &c) != nil {
		return "", nil, OFREPInvalidContext
	}
	tk, ok := c["targetingKey"]
	if !ok || string(tk) == "null" {
		return "", nil, OFREPTargetingKeyMissing
	}
	if json.Unmarshal(tk, &user) != nil || !feature.ReadableJSON(tk) {
		return "", nil, OFREPInvalidContext // not a string, or one decoding would change
	}
	if user == "" {
		return "", nil, OFREPTargetingKeyMissing
	}
	if feature.ValidateUser(user) != nil {
		return "", nil, OFREPInvalidContext
	}
	f, ok := c["flags"]
	if key != "" || !ok || string(f) == "null" {
		return user, nil, ""
	}
	flags = new([]string)
	if json.Unmarshal(f, flags) != nil || len(*flags) > MaxBulkFeatures {
		return "", nil, OFREPInvalidContext
	}
	return user, flags, ""
}

var parseSeeds = []string{
	``, ` `, `{}`, `[]`, `null`, `"x"`, `1`, `{"context":`, `{"context":null}`, `{"context":1}`,
	`{"context":{}}`, `{"context":{"targetingKey":"u"}}`, `{"context":{"targetingKey":"u"}} x`,
	`{"context":{"targetingKey":""}}`, `{"context":{"targetingKey":null}}`, `{"context":{"targetingKey":7}}`,
	`{"context":{"targetingKey":"a\"b\\c\u00e9\ud83d\ude00"}}`, `{"cont\u0065xt":{"targeting\u004bey":"esc"}}`,
	`{"Context":{"targetingKey":"u"}}`, `{"context":{"TargetingKey":"u"}}`,
	`{"context":{"targetingKey":"first"},"context":{"targetingKey":"last"}}`,
	`{"context":{"targetingKey":"u","targetingKey":"v"}}`,
	` { "extra" : [1, {"a": "}"}, "]"], "context" : { "email" : "x@y", "nested" : {"targetingKey": 1}, "targetingKey" : "u" } } `,
	`{"context":{"targetingKey":"u","flags":["a","b"]}}`, `{"context":{"targetingKey":"u","flags":"a"}}`,
	`{"context":{"targetingKey":"u","flags":[1]}}`, `{"context":{"targetingKey":"u","flags":null}}`,
	`{"context":{"targetingKey":"u","flags":[]}}`, "{\"context\":{\"targetingKey\":\"\xff\"}}",
	`{"context":{"targetingKey":true,"flags":{}}}`, `{"context":[]}`, `{"context":"u"}`,
	"{\"context\":{\"targetingKey\":\"u\"}}\n", `{"context":{"targetingKey":"\ud800"}}`, `{"context":{"targetingKey":"a\udc00"}}`,
	"{\"context\":{\"targetingKey\":\"\\u00e9\xe9\"}}",
	`{"context":{"targetingKey":"u","flags":["a\u0062", "c" ,"a"]}}`, `{"context":{"targetingKey":"u","flags":["a",null]}}`,
	"{\"context\":{\"targetingKey\":\"u\",\"flags\":[\"\xff\",\"\\\"\"]}}", `{"context":{"targetingKey":"u","flags":[ ]}}`,
	`{"context":{"targetingKey":"u","flags":["a",["b"]]}}`, `{"context":{"targetingKey":"u","flags":["a"],"flags":["b"]}}`,
	`{"context":{"targetingKey":"u","plan":{"tier":1,"t\u0069er":2}}}`, `{"context":{"targetingKey":"u","TargetingKey":"v"}}`,
	`{"context":{"targetingKey":"u","list":[{"a":1},{"a":1}]}}`, `{"context":{"targetingKey":"u"},"x":{"context":1},"context":{}}`,
}

func TestParseOFREP(t *testing.T) {
	for _, body := range parseSeeds {
		for _, key := range []string{"", "f"} {
			checkParse(t, []byte(body), key)
		}
	}
}

func FuzzParseOFREP(f *testing.F) {
	for _, body := range parseSeeds {
		f.Add([]byte(body), "")
		f.Add([]byte(body), "f")
	}
	f.Fuzz(checkParse)
}

func checkParse(t *testing.T, body []byte, key string) {
	user, flags, err := parseOFREP(body, key)
	wantUser, wantFlags, wantCode := referenceParse(body, key)
	code := ""
	if err != nil {
		code = err.ErrorCode
		if err.Key != key || err.ErrorDetails == "" {
			t.Errorf("parseOFREP(%q, %q) error = %+v, want the key and details", body, key, err)
		}
	}
	if code != wantCode || user != wantUser || (flags == nil) != (wantFlags == nil) ||
		flags != nil && !slices.Equal(*flags, *wantFlags) {
		t.Errorf("parseOFREP(%q, %q) = %q, %v, %q; want %q, %v, %q", body, key, user, deref(flags), code, wantUser, deref(wantFlags), wantCode)
	}
}

func deref(p *[]string) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestParseOFREPAllocs: a plain request costs one allocation, the user ID.
func TestParseOFREPAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	body := []byte(`{"context":{"targetingKey":"user-1","email":"a@example.com","plan":{"tier":2,"tags":["x","y"]}}}`)
	if n := testing.AllocsPerRun(100, func() { parseOFREP(body, "checkout") }); n > 1 {
		t.Errorf("parseOFREP allocates %v times, want 1", n)
	}
}

// BenchmarkRepeatedKey: what looking for repeated keys adds to an OFREP
// body's parse, beside the check of its JSON that the parse made before.
func BenchmarkRepeatedKey(b *testing.B) {
	body := []byte(`{"context":{"targetingKey":"user-4711@example.com","email":"a@example.com","plan":{"tier":2,"tags":["x","y"]}}}`)
	b.Run("validJSON", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			json.Valid(body)
		}
	})
	b.Run("RepeatedKey", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			jsonscan.RepeatedKey(body)
		}
	})
	b.Run("parseOFREP", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			parseOFREP(body, "f")
		}
	})
}
