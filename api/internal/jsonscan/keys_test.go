package jsonscan

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// referenceRepeats reports whether the JSON b repeats a key, once decoded,
// in any of its objects: RepeatedKey done with encoding/json's tokens.
func referenceRepeats(b []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	type frame struct {
		object  bool
		keys    map[string]bool
		wantKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{', '[':
				if top != nil && top.object {
					top.wantKey = true
				}
				stack = append(stack, &frame{object: tok == '{', keys: map[string]bool{}, wantKey: true})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.object && top.wantKey {
				if top.keys[tok] {
					return true
				}
				top.keys[tok] = true
				top.wantKey = false
				continue
			}
		}
		if top != nil && top.object {
			top.wantKey = true
		}
	}
}

var keysSeeds = []string{
	`{}`, `{"a":1,"b":2}`, `{"a":1,"a":2}`, `{"a":{"b":1},"c":{"b":1}}`, `{"a":{"b":1,"b":2}}`,
	`[{"a":1},{"a":1}]`, `{"a":"b","b":"a"}`, `{"\u0061":1,"a":2}`, `{"A":1,"a":2}`, `{"a":[{"x":1,"x":1}]}`,
	`{"k":"\"a\":","a":1,"\"a\":":2}`, "{\"\xff\":1,\"\xfe\":2}", `{"a":{},"b":{"a":1},"a":3}`,
	`{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9,"10":10,"11":11,"12":12,"13":13,"14":14,"15":15,"16":16,"17":17,"18":18,"3":0}`,
	`{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9,"10":10,"11":11,"12":12,"13":13,"14":14,"15":15,"16":16,"17":17,"o":{"3":1},"18":18,"19":{"a":1,"a":2}}`,
	`"x"`, `1`, `[[[{"a":[]}]]]`,
}

// FuzzRepeatedKey: RepeatedKey finds a repeated key exactly when
// encoding/json's tokens show one.
func FuzzRepeatedKey(f *testing.F) {
	for _, s := range keysSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		key, got := RepeatedKey(b)
		if want := referenceRepeats(b); got != want {
			t.Errorf("RepeatedKey(%q) = %q, %v; want %v", b, key, got, want)
		}
	})
}

func TestRepeatedKey(t *testing.T) {
	for _, s := range keysSeeds {
		key, got := RepeatedKey([]byte(s))
		if want := referenceRepeats([]byte(s)); got != want {
			t.Errorf("RepeatedKey(%q) = %q, %v; want %v", s, key, got, want)
		}
	}
}

// TestRepeatedKeyAllocs: an OFREP body of the usual size costs nothing.
func TestRepeatedKeyAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	body := []byte(`{"context":{"targetingKey":"user-1","email":"a@example.com","plan":{"tier":2,"tags":["x","y"]}}}`)
	if n := testing.AllocsPerRun(100, func() { RepeatedKey(body) }); n > 0 {
		t.Errorf("RepeatedKey allocates %v times, want 0", n)
	}
}
