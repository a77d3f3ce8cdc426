//go:build amd64 && !purego

package ring

import "math/bits"

// md5Block adds the MD5 compression of block into state (RFC 1321, section
// 3.4). It is written in assembly in md5block_amd64.s.
//
//go:noescape
func md5Block(state *[4]uint32, block *[64]byte)

// hashBlock returns the position of a message that block holds already
// padded as MD5's single final block: one compression from MD5's initial
// state.
func hashBlock(block *[64]byte) Position {
	state := [4]uint32{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476}
	md5Block(&state, block)
	// The digest is the state words little-endian; a Position reads it
	// big-endian.
	return Position{
		Hi: bits.ReverseBytes64(uint64(state[1])<<32 | uint64(state[0])),
		Lo: bits.ReverseBytes64(uint64(state[3])<<32 | uint64(state[2])),
	}
}
