package docfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// CheckJSON refuses a JSON document with a list (or object) longer than a
// document takes (document.MaxFeatures, feature.MaxBuckets, …), as
// an *Error naming its place, reading data token by token and stopping at
// the entry past the limit: a document over the limits is refused before
// anything of it is decoded. The document is data, or,
// when root is not "", the member root of the object data. Malformed JSON
// is left to the decoder: CheckJSON returns nil for it.
func CheckJSON(name string, data []byte, root string) error {
	c := jsonChecker{dec: json.NewDecoder(bytes.NewReader(data)), root: root}
	start := ""
	if root != "" {
		start = outside
	}
	err := c.value(start)
	if e, ok := err.(*Error); ok {
		e.File = name
		e.Line = 1 + bytes.Count(data[:min(int(c.dec.InputOffset()), len(data))], []byte("\n"))
		return e
	}
	return nil
}

// outside is the path of what lies outside the document: no limits.
const outside = "\x00"

// jsonChecker walks a JSON document for CheckJSON.
type jsonChecker struct {
	dec  *json.Decoder
	root string
	// place is where the walk is, as keys and indices ("" or an index).
	place []placeStep
	depth int // of the collection being read: 1 for the top one
}

type placeStep struct {
	key   string
	index int
}

// String renders the place as features[2].rules.
func (c *jsonChecker) String() string {
	var b strings.Builder
	for _, s := range c.place {
		if s.key == "" {
			fmt.Fprintf(&b, "[%d]", s.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.key)
	}
	return b.String()
}

// errMalformed stops the walk at JSON the decoder will refuse.
var errMalformed = fmt.Errorf("malformed JSON")

// value reads one value at path (a key of limits).
func (c *jsonChecker) value(path string) error {
	tok, err := c.dec.Token()
	if err != nil {
		return errMalformed
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	c.depth++
	defer func() { c.depth-- }()
	limit, limited := limits[path]
	tooMany := func() error {
		return &Error{Message: tooMany(c.String(), limit), OverLimit: true}
	}
	switch d {
	case '[':
		for i := 0; c.dec.More(); i++ {
			if limited && i >= limit {
				return tooMany()
			}
			c.place = append(c.place, placeStep{index: i})
			if err := c.value(path); err != nil {
				return err
			}
			c.place = c.place[:len(c.place)-1]
		}
	case '{':
		for i := 0; c.dec.More(); i++ {
			if limited && i >= limit {
				return tooMany()
			}
			kt, err := c.dec.Token()
			key, ok := kt.(string)
			if err != nil || !ok {
				return errMalformed
			}
			next := path + "." + key
			switch {
			case path == outside && key == c.root && c.depth == 1:
				next = ""
			case path == outside:
				next = outside
			case path == "":
				next = key
			}
			if path != outside || next == "" {
				c.place = append(c.place, placeStep{key: key})
			}
			if err := c.value(next); err != nil {
				return err
			}
			if path != outside || next == "" {
				c.place = c.place[:len(c.place)-1]
			}
		}
	}
	if _, err := c.dec.Token(); err != nil {
		return errMalformed
	}
	return nil
}
