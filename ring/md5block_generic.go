//go:build !amd64 || purego

package ring

import (
	"crypto/md5"
	"encoding/binary"
)

// hashBlock returns the position of a message that block holds already
// padded as MD5's single final block. Without assembly it hashes the
// message again with crypto/md5.
func hashBlock(block *[64]byte) Position {
	n := binary.LittleEndian.Uint64(block[56:]) / 8
	return fromDigest(md5.Sum(block[:n]))
}
