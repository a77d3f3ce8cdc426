package feature

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on a feature's tags and owner.
const (
	MaxTags       = 20
	MaxTagBytes   = 32
	MaxOwnerBytes = 128
)

// tagPattern is a tag: lower-case letters, digits and '_', '.', ':', '-',
// starting with a letter or digit, so that a tag reads the same in a URL,
// a filter and a script.
var tagPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.:-]{0,31}$`)

// validateLabels reports what is wrong with a feature's tags and owner as
// an EInvalid *Error (at the tags, a tag or the owner): at most MaxTags distinct tags (lower-case letters,
// digits and '_', '.', ':', '-', starting with a letter or digit), and an
// owner of at most MaxOwnerBytes of UTF-8 with no control character and no
// space at either end (a name, an e-mail address, a team).
func validateLabels(tags []string, owner string) error {
	if len(tags) > MaxTags {
		return invalidAt("tags", "a feature has at most %d tags, got %d", MaxTags, len(tags))
	}
	for i, t := range tags {
		if !tagPattern.MatchString(t) {
			return invalidAt(listField("tags", i), "tag %q is invalid: use 1 to %d characters of a-z, 0-9, '_', '.', ':', '-', starting with a letter or digit", Abbreviate(t), MaxTagBytes)
		}
		if slices.Contains(tags[:i], t) {
			return invalidAt(listField("tags", i), "tag %q appears twice", t)
		}
	}
	if len(owner) > MaxOwnerBytes || !utf8.ValidString(owner) {
		return invalidAt("owner", "owner must be valid UTF-8 of at most %d bytes", MaxOwnerBytes)
	}
	if strings.IndexFunc(owner, unicode.IsControl) >= 0 {
		return invalidAt("owner", "owner must not hold control characters (tabs, new lines, …)")
	}
	if strings.TrimSpace(owner) != owner {
		return invalidAt("owner", "owner must not start or end with a space")
	}
	return nil
}
