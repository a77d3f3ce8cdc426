package ring

import (
	"crypto/md5"
	"encoding/binary"
)

// Position is a point of the hash space [0, 2^128): an MD5 digest read as one
// unsigned 128-bit big-endian integer, kept whole in two words.
type Position struct {
	Hi, Lo uint64
}

// Hash returns the position of s: the MD5 digest of its UTF-8 bytes, as the
// reference does with int(hashlib.md5(s.encode()).hexdigest(), 16). It does
// not allocate for strings of up to 192 bytes.
func Hash(s string) Position {
	return HashPrefixed("", s)
}

// stackKey is the longest key HashPrefixed assembles on the stack; longer
// ones take an allocation.
const stackKey = 192

// HashPrefixed returns the position of prefix+s, Hash(prefix+s), without
// building the string: it assembles the key in a stack buffer and hashes it
// with crypto/md5, so it does not allocate when prefix and s together are up
// to 192 bytes long.
func HashPrefixed(prefix, s string) Position {
	n := len(prefix) + len(s)
	if n <= stackKey {
		var buf [stackKey]byte
		copy(buf[copy(buf[:], prefix):], s)
		return fromDigest(md5.Sum(buf[:n]))
	}
	key := make([]byte, 0, n)
	return fromDigest(md5.Sum(append(append(key, prefix...), s...)))
}

// HashBytes is Hash for a byte slice. It does not allocate, so callers on a
// hot path can hash a key they assemble in a stack buffer.
func HashBytes(b []byte) Position {
	return fromDigest(md5.Sum(b))
}

func fromDigest(d [md5.Size]byte) Position {
	return Position{Hi: binary.BigEndian.Uint64(d[:8]), Lo: binary.BigEndian.Uint64(d[8:])}
}

// Compare returns -1, 0 or +1 as p is less than, equal to or greater than q.
func (p Position) Compare(q Position) int {
	switch {
	case p.Hi < q.Hi:
		return -1
	case p.Hi > q.Hi:
		return 1
	case p.Lo < q.Lo:
		return -1
	case p.Lo > q.Lo:
		return 1
	}
	return 0
}

// less reports whether p < q.
func (p Position) less(q Position) bool {
	return p.Hi < q.Hi || (p.Hi == q.Hi && p.Lo < q.Lo)
}
