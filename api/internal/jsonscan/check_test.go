package jsonscan

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// checkSeeds are JSON and near-JSON of every kind Check tells apart.
var checkSeeds = []string{
	``, ` `, `{}`, `[]`, ` {} `, `{"a":1}`, `{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `[{"a":1},{"a":1}]`,
	`{"a":1,"b":{"a":1}}`, `{"a":1,"\u0061":2}`, `{"a\"b":1,"a\"b":2}`, `{"é":1,"\u00e9":2}`, `{"a":[1,{"a":2,"a":3}],"a":4}`,
	`{"a":1,}`, `[1,]`, `[1 2]`, `{"a" 1}`, `{"a":}`, `{:1}`, `{1:1}`, `{"a",1}`, `["a":1]`, `{"a":[}`, `{"a":1}x`, `{"a":1}}`, `]`, `}`, `,`,
	`"a\u00e9"`, `"\u00g0"`, `"\u00e"`, `"\x"`, `"\/\b\f\n\r\t\\\""`, `"a` + "\x01" + `"`, `"` + "\x7f\xff" + `"`, `"abc`, `"\`,
	`0`, `-0`, `-01`, `01`, `1.`, `1.5`, `1.5e`, `1.5e+3`, `1E-7`, `-`, `.5`, `+1`, `1e+`, `-1.0e10`, `12345678901234567890`,
	`true`, `tru`, `truex`, `nul`, `null `, ` false `, `[true,false,null]`, `{"a":[1,{"b":[true,false,null]}]}`,
	`{"context":{"targetingKey":"u","email":"a@example.com","seats":12,"beta":false,"tags":["x","y"],"nested":{"k":null}}}`,
	strings.Repeat("[", 100) + strings.Repeat("]", 100),
}

// checkAgainst fails t unless Check(b) says what json.Valid and
// RepeatedKey say.
func checkAgainst(t *testing.T, b []byte) {
	t.Helper()
	key, repeated, valid := Check(b)
	if want := json.Valid(b); valid != want {
		t.Fatalf("Check(%q) valid = %v, want %v", b, valid, want)
	}
	// Backslashes and bytes from 0x80 on can only be within strings.
	_, _, _, plain := CheckPlain(b)
	if want := valid && !bytes.ContainsAny(b, "\\") && !slices.ContainsFunc(b, func(c byte) bool { return c >= 0x80 }); plain != want {
		t.Fatalf("CheckPlain(%q) plain = %v, want %v", b, plain, want)
	}
	for i := range b {
		if b[i] == '"' && valid {
			if end, want := StringEnd(b, i), stringEndBytewise(b, i); end != want {
				t.Fatalf("StringEnd(%q, %d) = %d, want %d", b, i, end, want)
			}
		}
	}
	if !valid {
		return
	}
	if wantKey, wantRepeated := RepeatedKey(b); key != wantKey || repeated != wantRepeated {
		t.Fatalf("Check(%q) = %q, %v, want %q, %v", b, key, repeated, wantKey, wantRepeated)
	}
}

func TestCheck(t *testing.T) {
	for _, s := range checkSeeds {
		checkAgainst(t, []byte(s))
	}
	// Objects of many keys, with the repeat before and after the keys are
	// held in a map; encoding/json's bound on nesting, at it and past it.
	for _, n := range []int{3, manyKeys, manyKeys + 1, 40} {
		var keys []string
		for i := range n {
			keys = append(keys, `"k`+strconv.Itoa(i)+`":1`)
		}
		checkAgainst(t, []byte(`{`+strings.Join(keys, ",")+`}`))
		checkAgainst(t, []byte(`{`+strings.Join(keys, ",")+`,"k`+strconv.Itoa(n-1)+`":2}`))
		checkAgainst(t, []byte(`[{`+strings.Join(keys, ",")+`,"k0":2},{"k0":1}]`))
	}
	for _, depth := range []int{maxDepth, maxDepth + 1} {
		checkAgainst(t, []byte(strings.Repeat("[", depth)+strings.Repeat("]", depth)))
		checkAgainst(t, []byte(strings.Repeat(`{"a":`, depth)+"1"+strings.Repeat("}", depth)))
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range checkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkAgainst(t, b) })
}

// TestCheckAllocs: the bodies of OFREP and POST /evaluate cost nothing.
func TestCheckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	for _, body := range checkBodies {
		if n := testing.AllocsPerRun(100, func() { Check(body.b) }); n > 0 {
			t.Errorf("Check(%s) allocates %v times, want 0", body.name, n)
		}
	}
}

// checkBodies are the evaluation routes' usual bodies: OFREP's with a
// 6-attribute context, and POST /evaluate's of 20 features.
var checkBodies = []struct {
	name string
	b    []byte
}{
	{"ofrep", []byte(`{"context":{"targetingKey":"user-0007919@example.com","email":"someone@example.com","plan":"pro","country":"FR","seats":12,"beta":false,"app_version":"4.2.1"}}`)},
	{"post", []byte(`{"user":"user-0007919@example.com","features":["feature-00000","feature-00001","feature-00002","feature-00003","feature-00004","feature-00005","feature-00006","feature-00007","feature-00008","feature-00009","feature-00010","feature-00011","feature-00012","feature-00013","feature-00014","feature-00015","feature-00016","feature-00017","feature-00018","feature-00019"]}`)},
}

// BenchmarkCheck: Check against the two readings it replaces,
// json.Valid then RepeatedKey (the baseline), on the usual bodies.
func BenchmarkCheck(b *testing.B) {
	for _, body := range checkBodies {
		b.Run(body.name+"/Valid+RepeatedKey", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				if json.Valid(body.b) {
					RepeatedKey(body.b)
				}
			}
		})
		b.Run(body.name+"/Check", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				Check(body.b)
			}
		})
	}
}

// stringEndBytewise is StringEnd as it was written first, byte by byte.
func stringEndBytewise(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}
