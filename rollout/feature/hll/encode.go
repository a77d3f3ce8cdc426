package hll

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The binary form of a sketch: a format byte (1), the precision (12), and
// either 's' and the non-zero registers as (2-byte big-endian index,
// 1-byte value) in ascending index order, or 'd' and every register's
// byte. MarshalBinary picks the shorter; it is at most MaxEncodedSize
// bytes.
const (
	formatVersion  = 1
	sparseForm     = 's'
	denseForm      = 'd'
	MaxEncodedSize = 3 + M
)

// MarshalBinary returns s in its binary form (see above); an empty sketch
// is 3 bytes.
func (s *Sketch) MarshalBinary() ([]byte, error) { return s.Append(nil), nil }

// Append appends s's binary form to b.
func (s *Sketch) Append(b []byte) []byte {
	nonzero := 0
	for i := range M {
		if s.Register(i) != 0 {
			nonzero++
		}
	}
	b = append(b, formatVersion, Precision)
	if 3*nonzero < M {
		b = append(b, sparseForm)
		for i := range M {
			if r := s.Register(i); r != 0 {
				b = binary.BigEndian.AppendUint16(b, uint16(i))
				b = append(b, r)
			}
		}
		return b
	}
	b = append(b, denseForm)
	for i := range M {
		b = append(b, s.Register(i))
	}
	return b
}

// ErrMalformed is the error of UnmarshalBinary for bytes that are not a
// sketch's binary form.
var ErrMalformed = errors.New("not a distinct-users sketch (format 1, precision 12)")

// UnmarshalBinary merges the sketch of data (see MarshalBinary) into s. It
// returns an error wrapping ErrMalformed, and changes nothing, when data
// is not such a sketch: another format or precision, a register out of
// range, sparse registers out of order or repeated, or bytes missing or
// left over.
func (s *Sketch) UnmarshalBinary(data []byte) error {
	if err := Check(data); err != nil {
		return err
	}
	if data[2] == denseForm {
		for i, r := range data[3:] {
			if r != 0 {
				s.raise(i, uint32(r))
			}
		}
		return nil
	}
	for p := data[3:]; len(p) > 0; p = p[3:] {
		s.raise(int(binary.BigEndian.Uint16(p)), uint32(p[2]))
	}
	return nil
}

// Check reports whether data is a sketch's binary form, as
// UnmarshalBinary does, without reading it into one.
func Check(data []byte) error {
	if len(data) < 3 || data[0] != formatVersion || data[1] != Precision {
		return fmt.Errorf("%w: bad header", ErrMalformed)
	}
	body := data[3:]
	switch data[2] {
	case denseForm:
		if len(body) != M {
			return fmt.Errorf("%w: a dense sketch holds %d registers, got %d bytes", ErrMalformed, M, len(body))
		}
		for i, r := range body {
			if r > maxRank {
				return fmt.Errorf("%w: register %d holds %d, above %d", ErrMalformed, i, r, maxRank)
			}
		}
	case sparseForm:
		if len(body)%3 != 0 || len(body) > 3*M {
			return fmt.Errorf("%w: sparse registers come in 3 bytes each", ErrMalformed)
		}
		last := -1
		for p := body; len(p) > 0; p = p[3:] {
			i, r := int(binary.BigEndian.Uint16(p)), p[2]
			if i <= last || i >= M || r == 0 || r > maxRank {
				return fmt.Errorf("%w: sparse register %d = %d out of order or range", ErrMalformed, i, r)
			}
			last = i
		}
	default:
		return fmt.Errorf("%w: unknown form %q", ErrMalformed, data[2])
	}
	return nil
}
