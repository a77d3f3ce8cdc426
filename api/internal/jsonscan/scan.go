// Package jsonscan reads JSON without decoding it and, for the usual
// request bodies, without allocating: whether a body is JSON at all, as
// json.Valid says, and, in JSON it has accepted, the members of an object,
// the ends of values, the value of a string, and the keys that repeat
// within an object, which package api refuses in every request body and
// package evaluation in the bodies it reads by hand.
//
// The files:
//
//   - scan.go: the members of an object, the ends of values and strings.
//   - keys.go: repeated keys, in any JSON (RepeatedKey) and in a request
//     body decoded into a Go type (RepeatedField).
//   - check.go: whether a body is JSON and which key it repeats, in one
//     reading (Check), for the bodies read by hand.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// The functions below read JSON that json.Valid has accepted.

// SkipSpace returns the index of the first byte of b from i on that is not
// JSON white space (len(b) if none is).
// SkipSpace returns the index of the first byte of b from i on that is not
// JSON white space, len(b) if none is.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// ValueEnd returns the index just past the JSON value that starts at b[i].
func ValueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return StringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = StringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}

// StringEnd returns the index just past the JSON string that starts at b[i].
// It looks for each quote with bytes.IndexByte; a quote after an odd
// number of backslashes is escaped, and the string goes on.
func StringEnd(b []byte, i int) int {
	for i++; i < len(b); {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		q += i
		n := 0
		for q-n-1 >= i && b[q-n-1] == '\\' {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
	return i
}

// Members iterates over the members of a JSON object: Next moves to the
// next, whose raw key and value it sets.
type Members struct {
	b          []byte
	i          int
	Key, Value []byte // the current member's, raw
}

// MembersAt returns the members of the JSON object that starts at b[i].
func MembersAt(b []byte, i int) Members { return Members{b: b, i: i} }

// Next moves to the next member, and reports whether there is one.
func (m *Members) Next() bool {
	if m.Key == nil {
		m.i++ // past '{'
	}
	m.i = SkipSpace(m.b, m.i)
	if m.b[m.i] == ',' {
		m.i = SkipSpace(m.b, m.i+1)
	}
	if m.b[m.i] == '}' {
		return false
	}
	end := StringEnd(m.b, m.i)
	m.Key = m.b[m.i:end]
	m.i = SkipSpace(m.b, SkipSpace(m.b, end)+1) // past ':'
	end = ValueEnd(m.b, m.i)
	m.Value = m.b[m.i:end]
	m.i = end
	return true
}

// KeyIs reports whether the current member's key is name.
func (m *Members) KeyIs(name string) bool {
	if inner := m.Key[1 : len(m.Key)-1]; bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == name // no allocation
	}
	return String(m.Key) == name
}

// String returns the value of a raw JSON string, as encoding/json decodes
// it.
func String(raw []byte) string {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	_ = json.Unmarshal(raw, &s) // invalid UTF-8 becomes U+FFFD, as in any decoded string
	return s
}
