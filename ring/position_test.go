package ring

import (
	"strings"
	"testing"
)

// The tests of HashPrefixed hold it to naiveHash, crypto/md5 of the
// concatenation read as a big integer, on every length that decides how MD5
// pads: up to 55 bytes fit one block, 56 to 63 need a second
// block for the length, 64 fills a block exactly, and so on to 192, past
// which HashPrefixed allocates.

func checkHashPrefixed(t *testing.T, prefix, s string) {
	t.Helper()
	got, want := HashPrefixed(prefix, s).big(), naiveHash(prefix+s)
	if got.Cmp(want) != 0 {
		t.Errorf("HashPrefixed(%q, %q) = %032x, want %032x", prefix, s, got, want)
	}
}

func TestHashPrefixedKnownDigests(t *testing.T) {
	// The test suite of RFC 1321, appendix A.5.
	tests := []struct {
		msg, want string
	}{
		{"", "d41d8cd98f00b204e9800998ecf8427e"},
		{"a", "0cc175b9c0f1b6a831c399e269772661"},
		{"abc", "900150983cd24fb0d6963f7d28e17f72"},
		{"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
		{"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
		{"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"},
		{strings.Repeat("1234567890", 8), "57edf4a22be3c955ac49da2e2107b67a"},
	}
	for _, tt := range tests {
		for cut := range len(tt.msg) + 1 {
			prefix, s := tt.msg[:cut], tt.msg[cut:]
			if got := HashPrefixed(prefix, s).big().Text(16); leftPad(got) != tt.want {
				t.Errorf("HashPrefixed(%q, %q) = %s, want %s", prefix, s, leftPad(got), tt.want)
			}
		}
	}
}

// leftPad pads a hexadecimal position to its 32 digits.
func leftPad(hex string) string { return strings.Repeat("0", 32-len(hex)) + hex }

func TestHashPrefixedEveryLength(t *testing.T) {
	ascii := strings.Repeat("user-0123456789abcdefghijklmnopqrstuvwxyz:", 5)
	all := make([]byte, 200) // every byte value but 56, 0x00 and 0x80 among them
	for i := range all {
		all[i] = byte(i*37 + 11)
	}
	for name, text := range map[string]string{"ascii": ascii[:200], "bytes": string(all)} {
		t.Run(name, func(t *testing.T) {
			for n := 0; n <= 200; n++ {
				for _, cut := range []int{0, 1, 4, n / 2, n - 1, n} {
					if cut < 0 || cut > n {
						continue
					}
					checkHashPrefixed(t, text[:cut], text[cut:n])
				}
			}
		})
	}
}

func TestHashPrefixedAtTheBlockBoundaries(t *testing.T) {
	for _, n := range []int{54, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 191, 192, 193} {
		for _, prefix := range []string{"", "f01:", "ß:", strings.Repeat("s", n)} {
			if len(prefix) > n {
				continue
			}
			checkHashPrefixed(t, prefix, strings.Repeat("\xff", n-len(prefix)))
		}
	}
}

func TestHashPrefixedNonASCII(t *testing.T) {
	for _, s := range []string{"ünïcødé", "用户-00001234", "🙂🙃", "\x00", "\x80", "\xff\xfe\xfd", "invalid \xc3\x28 utf-8"} {
		for _, prefix := range []string{"", "salt:", "sål†:", "\x80"} {
			checkHashPrefixed(t, prefix, s)
		}
	}
}

func TestHashPrefixedRandom(t *testing.T) {
	rng := newRand(55)
	for range 20000 {
		n := rng.IntN(201)
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		cut := rng.IntN(n + 1)
		checkHashPrefixed(t, string(b[:cut]), string(b[cut:]))
	}
}

func TestHashIsHashPrefixedWithoutPrefix(t *testing.T) {
	for n := 0; n <= 200; n++ {
		s := strings.Repeat("k", n)
		if got, want := Hash(s), HashPrefixed("", s); got != want {
			t.Errorf("Hash(%q) = %v, want %v", s, got, want)
		}
		if got, want := HashBytes([]byte(s)), HashPrefixed("", s); got != want {
			t.Errorf("HashBytes(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestHashPrefixedDoesNotAllocate(t *testing.T) {
	for _, n := range []int{0, 13, 55, 56, 64, 120, 192} {
		key := strings.Repeat("u", n)
		cut := min(n, 4)
		prefix, s := key[:cut], key[cut:]
		if allocs := testing.AllocsPerRun(100, func() { sinkPosition = HashPrefixed(prefix, s) }); allocs != 0 {
			t.Errorf("HashPrefixed of %d bytes allocates %v times, want 0", n, allocs)
		}
		if allocs := testing.AllocsPerRun(100, func() { sinkPosition = Hash(key) }); allocs != 0 {
			t.Errorf("Hash of %d bytes allocates %v times, want 0", n, allocs)
		}
	}
}

var sinkPosition Position

func FuzzHashPrefixed(f *testing.F) {
	f.Add("", "")
	f.Add("f01:", "user-00001234")
	f.Add("", strings.Repeat("x", 55))
	f.Add("salt:", strings.Repeat("y", 51))
	f.Add(strings.Repeat("p", 60), strings.Repeat("s", 60))
	f.Add("ß:", "用户\x80\xff")
	f.Fuzz(func(t *testing.T, prefix, s string) {
		checkHashPrefixed(t, prefix, s)
		if prefix == "" {
			if got, want := Hash(s), HashPrefixed("", s); got != want {
				t.Errorf("Hash(%q) = %v, want %v", s, got, want)
			}
		}
	})
}
