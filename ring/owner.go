package ring

import "strconv"

// Owner returns the bucket that serves the key at position h on the ring of
// buckets, as New(buckets...).LookupPosition(h) would, without building the
// ring: it hashes each point once and keeps the best so far, which costs
// one hash per point, no sorting and no allocation. It is for answering
// one lookup on a ring that is not kept; buckets must be valid for New.
func Owner(buckets []Bucket, h Position) (bucket string, ok bool) {
	var (
		after, first       Position // the owning point at or after h; the first point of all
		afterName, minName string
		haveAfter          bool
		buf                [96]byte
	)
	for _, b := range buckets {
		for r := range b.Replicas {
			p := HashBytes(strconv.AppendInt(append(append(buf[:0], b.Name...), '#'), int64(r), 10))
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
