package jsonscan

import "bytes"

// Every request body the evaluation routes read by hand is first checked
// to be JSON, as json.Valid checks it, and for repeated keys, as
// RepeatedKey looks for them. Check does both in one reading of the body,
// where json.Valid then RepeatedKey read it twice, json.Valid through a
// state machine that calls a function for every byte: BenchmarkCheck
// measures the two against it on OFREP's and POST /evaluate's bodies, and
// FuzzCheck holds it to their answers.

// maxDepth is how deeply encoding/json lets arrays and objects nest.
const maxDepth = 10000

// Check reports whether b is one JSON value, as json.Valid does, and,
// when it is, returns what RepeatedKey(b) returns: the first key that
// repeats an earlier key of its object, at any depth. It allocates nothing
// for JSON that nests at most 16 arrays and objects deep, with at most 32
// keys without escapes in the objects open at once.
func Check(b []byte) (key string, repeated, valid bool) {
	key, repeated, valid, _ = CheckPlain(b)
	return key, repeated, valid
}

// CheckPlain is Check, which also reports whether every string of b, key
// or value, is plain: printable ASCII without escapes, so that its value
// is the bytes between its quotes, valid UTF-8 (plain is false when b is
// not JSON). Readers of b's strings then need not look at them again.
func CheckPlain(b []byte) (key string, repeated, valid, plain bool) {
	type container struct {
		object bool
		start  int                 // its first key in keys
		seen   map[string]struct{} // its keys once it has more than manyKeys
	}
	var stackArr [16]container
	var keysArr [32][]byte
	stack, keys := stackArr[:0], keysArr[:0]
	// next is what the grammar expects at b[i]: a value, a key, or what
	// follows a value.
	const (
		value = iota
		member
		after
	)
	next, i, n := value, SkipSpace(b, 0), len(b)
	plain = true
	for {
		switch next {
		case value:
			if i >= n {
				return "", false, false, false
			}
			next = after
			switch c := b[i]; {
			case c == '{' || c == '[':
				if len(stack) == maxDepth {
					return "", false, false, false
				}
				stack = append(stack, container{object: c == '{', start: len(keys)})
				i = SkipSpace(b, i+1)
				switch {
				case i < n && (b[i] == '}' && c == '{' || b[i] == ']' && c == '['):
					i++
					stack = stack[:len(stack)-1]
				case c == '{':
					next = member
				default:
					next = value
				}
				continue
			case c == '"':
				end, ok, p := checkString(b, i)
				if !ok {
					return "", false, false, false
				}
				i, plain = end, plain && p
			case c == 't' || c == 'f' || c == 'n':
				lit := literals[c]
				if !bytes.HasPrefix(b[i:], lit) {
					return "", false, false, false
				}
				i += len(lit)
			case c == '-' || '0' <= c && c <= '9':
				end, ok := checkNumber(b, i)
				if !ok {
					return "", false, false, false
				}
				i = end
			default:
				return "", false, false, false
			}
		case member:
			if i >= n || b[i] != '"' {
				return "", false, false, false
			}
			end, ok, p := checkString(b, i)
			if !ok {
				return "", false, false, false
			}
			plain = plain && p
			if !repeated {
				top := &stack[len(stack)-1]
				k := b[i+1 : end-1]
				if !p {
					k = keyBytes(b[i:end])
				}
				if top.seen != nil {
					_, repeated = top.seen[string(k)]
					top.seen[string(k)] = struct{}{}
				} else {
					for _, prev := range keys[top.start:] {
						if bytes.Equal(prev, k) {
							repeated = true
							break
						}
					}
					if keys = append(keys, k); len(keys)-top.start > manyKeys {
						top.seen = make(map[string]struct{}, 2*manyKeys)
						for _, prev := range keys[top.start:] {
							top.seen[string(prev)] = struct{}{}
						}
						keys = keys[:top.start]
					}
				}
				if repeated {
					key = string(k)
				}
			}
			if i = SkipSpace(b, end); i >= n || b[i] != ':' {
				return "", false, false, false
			}
			next, i = value, SkipSpace(b, i+1)
			continue
		}
		// After a value.
		i = SkipSpace(b, i)
		if len(stack) == 0 {
			return key, repeated, i == n, plain && i == n
		}
		if i >= n {
			return "", false, false, false
		}
		top := &stack[len(stack)-1]
		switch c := b[i]; {
		case c == ',':
			next, i = value, SkipSpace(b, i+1)
			if top.object {
				next = member
			}
		case c == '}' && top.object, c == ']' && !top.object:
			i++
			keys = keys[:top.start]
			stack = stack[:len(stack)-1]
			next = after
		default:
			return "", false, false, false
		}
	}
}

var literals = [256][]byte{'t': []byte("true"), 'f': []byte("false"), 'n': []byte("null")}

// checkString returns the index just past the JSON string that starts at
// b[i], and whether it is one: no control characters, and only the
// escapes JSON has. plain reports that it holds neither escapes nor bytes
// outside ASCII: its text is the bytes between its quotes.
func checkString(b []byte, i int) (end int, ok, plain bool) {
	plain = true
	for i++; i < len(b); i++ {
		c := b[i]
		if stringSafe[c] {
			continue
		}
		switch {
		case c == '"':
			return i + 1, true, plain
		case c < 0x20:
			return i, false, false
		case c >= 0x80:
			plain = false
		case c == '\\':
			plain = false
			if i++; i == len(b) {
				return i, false, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return i, false, false
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return i, false, false
					}
				}
				i += 4
			default:
				return i, false, false
			}
		}
	}
	return i, false, false
}

// stringSafe marks the bytes a JSON string holds as they are: printable
// ASCII but the quote and the backslash.
var stringSafe = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// checkNumber returns the index just past the JSON number that starts at
// b[i], and whether it is one.
func checkNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	digits := func() bool {
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > start
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return i, false
		}
	}
	return i, true
}
