package ring

import "strconv"

// AppendPoints appends to dst the positions of the points of replicas from
// to to-1 of the bucket named name: Hash(name+"#"+r), in replica order.
func AppendPoints(dst []Position, name string, from, to int) []Position {
	var buf [96]byte
	for r := from; r < to; r++ {
		dst = append(dst, HashBytes(strconv.AppendInt(append(append(buf[:0], name...), '#'), int64(r), 10)))
	}
	return dst
}

// Owner returns the bucket that serves the key at position h on the ring of
// buckets, as New(buckets...).LookupPosition(h) would, without building the
// ring. points[i] holds the positions of the points of buckets[i] (see
// AppendPoints), at least buckets[i].Replicas of them; only those are read.
// It costs one comparison per point, no sorting and no allocation, so that
// one lookup on each of many rings that share their buckets' points, such
// as the versions of a feature, hashes each point once.
func Owner(buckets []Bucket, points [][]Position, h Position) (bucket string, ok bool) {
	var (
		after, first       Position // the owning point at or after h; the first point of all
		afterName, minName string
		haveAfter          bool
	)
	for i, b := range buckets {
		for _, p := range points[i][:b.Replicas] {
			if !ok || pointLess(p, b.Name, first, minName) {
				first, minName, ok = p, b.Name, true
			}
			if !p.less(h) && (!haveAfter || pointLess(p, b.Name, after, afterName)) {
				after, afterName, haveAfter = p, b.Name, true
			}
		}
	}
	if haveAfter {
		return afterName, true
	}
	return minName, ok
}

// pointLess orders points as New sorts them: by position, then bucket name.
func pointLess(p Position, name string, q Position, qName string) bool {
	if c := p.Compare(q); c != 0 {
		return c < 0
	}
	return name < qName
}
