package feature

import (
	"encoding/binary"
	"encoding/hex"
	"slices"

	"github.com/rollout/rollout/ring"
)

// User lists. A segment may be a list of users rather than a set of
// conditions (Segment.List): in_segment then holds for the users it
// names, matched by the feature's bucketing key (the user ID, or the
// value of the feature's bucket_by attribute, as its ring hashes it).
// The list is kept hashed, as overrides are (OverrideHash): each entry is
// the MD5 of the segment's key, ":" and the user ID (ListUserHash), so
// that snapshots and sync forms never hold the IDs themselves, and a test
// is one hash and one look-up in a hash set, whatever the list's size.
// The IDs live in the store; a server compiles a list from them
// (NewUserList), an in-app client from the hashes its sync form carries.

// MaxListUsers bounds the users of one user list.
const MaxListUsers = 100_000

// UserList is the users of a user-list segment, hashed: immutable once
// made, shared by every compiled segment of the list's versions that did
// not change it.
type UserList struct {
	prefix string // the segment's key and ":", which the hashes follow
	set    map[ring.Position]struct{}
}

// listPrefix is what a list's users are hashed after: its key and ":",
// as a feature without a salt hashes its overrides (overridePrefix).
func listPrefix(key string) string { return overridePrefix(key, "") }

// ListUserHash returns the hash under which the user list of segment key
// holds user, as 32 hex digits: OverrideHash of a feature of that key
// without a salt.
func ListUserHash(key, user string) string {
	return positionHex(userPosition(listPrefix(key), user))
}

// NewUserList returns the list of users of segment key, hashed: each ID
// once (a repeated one counts once).
func NewUserList(key string, users []string) *UserList {
	l := &UserList{prefix: listPrefix(key), set: make(map[ring.Position]struct{}, len(users))}
	for _, u := range users {
		l.set[userPosition(l.prefix, u)] = struct{}{}
	}
	return l
}

// Len returns how many users l holds; 0 for nil.
func (l *UserList) Len() int {
	if l == nil {
		return 0
	}
	return len(l.set)
}

// Has reports whether l holds user.
func (l *UserList) Has(user string) bool {
	if l == nil {
		return false
	}
	_, ok := l.set[userPosition(l.prefix, user)]
	return ok
}

// Diff returns how many of users (each counted once) l lacks, which a
// change to exactly users adds, and how many of l's users are not among
// them, which it removes: the exact users that enter and leave the list.
func (l *UserList) Diff(users []string) (added, removed int) {
	seen := make(map[ring.Position]struct{}, len(users))
	kept := 0
	for _, u := range users {
		p := userPosition(l.prefix, u)
		if _, dup := seen[p]; dup {
			continue
		}
		seen[p] = struct{}{}
		if _, ok := l.set[p]; ok {
			kept++
		} else {
			added++
		}
	}
	return added, len(l.set) - kept
}

// Edit returns a new list: l with add's users and without remove's.
func (l *UserList) Edit(add, remove []string) *UserList {
	next := &UserList{prefix: l.prefix, set: make(map[ring.Position]struct{}, len(l.set)+len(add))}
	for p := range l.set {
		next.set[p] = struct{}{}
	}
	for _, u := range remove {
		delete(next.set, userPosition(l.prefix, u))
	}
	for _, u := range add {
		next.set[userPosition(l.prefix, u)] = struct{}{}
	}
	return next
}

// holdsAt reports whether l holds the user (or attribute value) the ring
// hashes to pos after l's prefix.
func (l *UserList) holdsAt(pos ring.Position) bool {
	_, ok := l.set[pos]
	return ok
}

// sorted returns l's hashes in order, as its sync form lists them.
func (l *UserList) sorted() []ring.Position {
	out := make([]ring.Position, 0, l.Len())
	if l != nil {
		for p := range l.set {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, ring.Position.Compare)
	return out
}

// appendHashes appends l's hashes to dst as a JSON list of 32-hex-digit
// strings, sorted.
func (l *UserList) appendHashes(dst []byte) []byte {
	dst = append(dst, '[')
	for i, p := range l.sorted() {
		if i > 0 {
			dst = append(dst, ',')
		}
		var raw [16]byte
		binary.BigEndian.PutUint64(raw[:8], p.Hi)
		binary.BigEndian.PutUint64(raw[8:], p.Lo)
		dst = append(dst, '"')
		dst = hex.AppendEncode(dst, raw[:])
		dst = append(dst, '"')
	}
	return append(dst, ']')
}

// userListOfHashes returns the list of segment key whose hashes are
// hashes (32 hex digits each, as a sync form carries them).
func userListOfHashes(key string, hashes []string) (*UserList, error) {
	if len(hashes) > MaxListUsers {
		return nil, Errorf(EInvalid, "segment %q: a user list has at most %d users; the sync form lists %d", key, MaxListUsers, len(hashes))
	}
	l := &UserList{prefix: listPrefix(key), set: make(map[ring.Position]struct{}, len(hashes))}
	for _, h := range hashes {
		var raw [16]byte
		if len(h) != 2*len(raw) {
			return nil, Errorf(EInvalid, "segment %q: user hash %q is not 32 hex digits", key, Abbreviate(h))
		}
		if _, err := hex.Decode(raw[:], []byte(h)); err != nil {
			return nil, Errorf(EInvalid, "segment %q: user hash %q is not 32 hex digits", key, Abbreviate(h))
		}
		p := ring.Position{Hi: binary.BigEndian.Uint64(raw[:8]), Lo: binary.BigEndian.Uint64(raw[8:])}
		if _, dup := l.set[p]; dup {
			return nil, Errorf(EInvalid, "segment %q: user hash %s appears twice", key, h)
		}
		l.set[p] = struct{}{}
	}
	return l, nil
}

// CompileUserList makes s, a user-list segment (s.List), ready for
// evaluation with its users (nil: none).
func CompileUserList(s Segment, users *UserList) *CompiledSegment {
	if users == nil {
		users = NewUserList(s.Key, nil)
	}
	return &CompiledSegment{segment: s, users: users}
}

// CompileSegmentAfter compiles seg, the next configuration of the segment
// that cur (nil: none) is compiled from: a user list keeps cur's users,
// which a change of its description does not touch.
func CompileSegmentAfter(seg Segment, cur *CompiledSegment) *CompiledSegment {
	if seg.List && cur != nil {
		return CompileUserList(seg, cur.users)
	}
	return CompileSegment(seg)
}

// Users returns the users of a user-list segment (nil for a segment of
// conditions). The list is shared and immutable.
func (s *CompiledSegment) Users() *UserList { return s.users }

// ValidateListUsers refuses a list of users that a user list cannot hold:
// more than MaxListUsers, or an entry that is no valid user ID
// (ValidateUser: 1 to MaxUserBytes bytes of UTF-8). field names the list
// in the error ("users", "add").
func ValidateListUsers(field string, users []string) error {
	if len(users) > MaxListUsers {
		return invalidAt(field, "%d users; a user list has at most %d", len(users), MaxListUsers)
	}
	for i, u := range users {
		if err := ValidateUser(u); err != nil {
			return invalidAt(listField(field, i), "%s", ErrorMessage(err))
		}
	}
	return nil
}
