// Package docfile reads and writes documents of features (document.Document)
// as files, YAML or JSON: one schema, read by one YAML parser (JSON is
// YAML), so that every error in a file, of syntax, of type or of sense,
// says the line it is on. Reading costs in proportion to the file's size,
// whatever it holds: what would cost the parser more is refused before it
// is parsed, and lists over the document's limits before they are decoded.
//
// docfile.go reads and writes files; json.go holds a JSON body that the
// server decodes itself to the same limits (CheckJSON).
package docfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
)

// Error is what is wrong with a file, at a line of it (0: the whole file).
type Error struct {
	File         string
	Line, Column int
	Message      string
	// Source is the lines around the error, the line marked, as the YAML
	// parser shows them; "" when there is no line.
	Source string
	// OverLimit: the file is well formed, but a list of it is longer
	// than a document takes (as document.Document.Validate would say).
	OverLimit bool
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.Source != "" {
		b.WriteString("\n")
		b.WriteString(strings.TrimRight(e.Source, "\n"))
	}
	return b.String()
}

// yamlError is what the YAML parser's errors tell.
type yamlError interface {
	error
	GetToken() *token.Token
	GetMessage() string
}

// Parse reads the document in data, YAML or JSON, from the file name (used
// in errors): it refuses a file larger than document.MaxBytes,
// unknown fields, duplicate keys, values of the wrong type, and whatever
// document.Document.Validate refuses, each as an *Error with its line.
func Parse(name string, data []byte) (document.Document, error) {
	if len(data) > document.MaxBytes {
		return document.Document{}, TooLarge(name, int64(len(data)))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return document.Document{}, &Error{File: name, Message: `the file is empty: a document is "features: [...]"`}
	}
	var f File
	file, err := unmarshal(name, data, &f, maxFileStructure)
	if err != nil {
		return document.Document{}, err
	}
	d, err := f.Document(name)
	if err != nil {
		return document.Document{}, err
	}
	if err := d.Validate(); err != nil {
		return document.Document{}, atPath(name, file, err)
	}
	return d, nil
}

// TooLarge is the error of a file of size bytes, more than
// document.MaxBytes.
func TooLarge(name string, size int64) error {
	return &Error{File: name, Message: fmt.Sprintf("the file is %d bytes, more than a document may have (%d bytes, %d MB): split it into several files", size, document.MaxBytes, document.MaxBytes>>20)}
}

// File is a document as a file holds it: a document.Document whose JSON
// values (buckets' values, conditions' values) are the YAML nodes they
// were written as. Document turns it into one.
type File struct {
	// Environment, when given, is the environment the document is for.
	Environment string        `yaml:"environment"`
	Features    []fileFeature `yaml:"features"`
	Segments    []fileSegment `yaml:"segments"`
}

type fileFeature struct {
	Key         string            `yaml:"key"`
	Description string            `yaml:"description"`
	Enabled     *bool             `yaml:"enabled"`
	Fallback    string            `yaml:"fallback"`
	Salt        string            `yaml:"salt"`
	Buckets     []fileBucket      `yaml:"buckets"`
	Tolerance   float64           `yaml:"tolerance"`
	Overrides   map[string]string `yaml:"overrides"`
	Rules       []fileRule        `yaml:"rules"`
	BucketBy    string            `yaml:"bucket_by"`
	Tags        []string          `yaml:"tags"`
	Owner       string            `yaml:"owner"`
	// Prerequisites: features that must serve the user some buckets.
	Prerequisites []filePrerequisite `yaml:"prerequisites"`
}

type filePrerequisite struct {
	Feature string   `yaml:"feature"`
	Buckets []string `yaml:"buckets"`
}

type fileBucket struct {
	Name     string   `yaml:"name"`
	Share    *float64 `yaml:"share"`
	Replicas *int     `yaml:"replicas"`
	Value    ast.Node `yaml:"value"`
}

type fileRule struct {
	Name       string          `yaml:"name"`
	Conditions []fileCondition `yaml:"conditions"`
	Serve      feature.Serve   `yaml:"serve"`
}

type fileCondition struct {
	Attribute  string          `yaml:"attribute"`
	Op         string          `yaml:"op"`
	Value      ast.Node        `yaml:"value"`
	IgnoreCase bool            `yaml:"ignore_case"`
	Any        []fileCondition `yaml:"any"`
}

type fileSegment struct {
	Key         string          `yaml:"key"`
	Description string          `yaml:"description"`
	Conditions  []fileCondition `yaml:"conditions"`
	List        bool            `yaml:"list"` // a user list, by reference
}

// Document returns f as a document.Document, its values as JSON; a value
// that JSON cannot hold is an *Error with its line in the file name.
func (f *File) Document(name string) (document.Document, error) {
	d := document.Document{Environment: f.Environment}
	if f.Features != nil {
		d.Features = make([]document.Feature, 0, len(f.Features))
	}
	var conditions func(cs []fileCondition) ([]feature.Condition, error)
	conditions = func(cs []fileCondition) ([]feature.Condition, error) {
		var out []feature.Condition
		for _, c := range cs {
			v, err := nodeJSON(name, c.Value)
			if err != nil {
				return nil, err
			}
			fc := feature.Condition{Attribute: c.Attribute, Op: c.Op, Value: v, IgnoreCase: c.IgnoreCase}
			if c.Any != nil {
				if fc.Any, err = conditions(c.Any); err != nil {
					return nil, err
				}
				if fc.Any == nil {
					fc.Any = []feature.Condition{} // "any: []", which validation refuses
				}
			}
			out = append(out, fc)
		}
		return out, nil
	}
	for _, ff := range f.Features {
		df := document.Feature{
			Key: ff.Key, Description: ff.Description, Enabled: ff.Enabled, Fallback: ff.Fallback, Salt: ff.Salt,
			Tolerance: ff.Tolerance, Overrides: ff.Overrides, BucketBy: ff.BucketBy, Tags: ff.Tags, Owner: ff.Owner,
		}
		for _, b := range ff.Buckets {
			v, err := nodeJSON(name, b.Value)
			if err != nil {
				return document.Document{}, err
			}
			df.Buckets = append(df.Buckets, document.Bucket{Name: b.Name, Share: b.Share, Replicas: b.Replicas, Value: v})
		}
		for _, p := range ff.Prerequisites {
			df.Prerequisites = append(df.Prerequisites, feature.Prerequisite{Feature: p.Feature, Buckets: p.Buckets})
		}
		for _, r := range ff.Rules {
			cs, err := conditions(r.Conditions)
			if err != nil {
				return document.Document{}, err
			}
			df.Rules = append(df.Rules, feature.Rule{Name: r.Name, Conditions: cs, Serve: r.Serve})
		}
		d.Features = append(d.Features, df)
	}
	if f.Segments != nil {
		d.Segments = []document.Segment{}
	}
	for _, s := range f.Segments {
		cs, err := conditions(s.Conditions)
		if err != nil {
			return document.Document{}, err
		}
		d.Segments = append(d.Segments, document.Segment{Key: s.Key, Description: s.Description, Conditions: cs, List: s.List})
	}
	return d, nil
}

// nodeJSON returns the JSON of a value written in YAML (nil for none or
// null): mappings as objects in their order, numbers as written when JSON
// takes them so, strings quoted. What JSON cannot hold (infinities, NaN)
// is an *Error with its line.
func nodeJSON(name string, n ast.Node) (json.RawMessage, error) {
	if n == nil {
		return nil, nil
	}
	if _, ok := n.(*ast.NullNode); ok {
		return nil, nil
	}
	var b bytes.Buffer
	if err := writeJSON(name, &b, n, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeJSON(name string, b *bytes.Buffer, n ast.Node, depth int) error {
	fail := func(format string, args ...any) error {
		e := &Error{File: name, Message: fmt.Sprintf(format, args...)}
		if tk := n.GetToken(); tk != nil && tk.Position != nil {
			e.Line, e.Column = tk.Position.Line, tk.Position.Column
		}
		return e
	}
	if depth > maxNesting {
		return fail("the value nests more than %d deep", maxNesting)
	}
	str := func(s string) {
		j, _ := json.Marshal(s)
		b.Write(j)
	}
	number := func(text string, v any) {
		if json.Valid([]byte(text)) {
			b.WriteString(text)
			return
		}
		j, _ := json.Marshal(v)
		b.Write(j)
	}
	switch n := n.(type) {
	case *ast.NullNode:
		b.WriteString("null")
	case *ast.BoolNode:
		b.WriteString(strconv.FormatBool(n.Value))
	case *ast.IntegerNode:
		number(n.Token.Value, n.Value)
	case *ast.FloatNode:
		number(n.Token.Value, n.Value)
	case *ast.StringNode:
		// A plain scalar that is a JSON number (1e3) is one, as in JSON.
		if n.Token.Type == token.StringType && n.Value != "" && strings.ContainsRune("-0123456789", rune(n.Value[0])) && json.Valid([]byte(n.Value)) {
			b.WriteString(n.Value)
			return nil
		}
		str(n.Value)
	case *ast.LiteralNode:
		str(n.Value.Value)
	case *ast.SequenceNode:
		b.WriteByte('[')
		for i, v := range n.Values {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(name, b, v, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case *ast.MappingNode:
		return writePairs(name, b, n.Values, depth)
	case *ast.MappingValueNode:
		return writePairs(name, b, []*ast.MappingValueNode{n}, depth)
	default:
		return fail("this value cannot be JSON (%s): write JSON, or YAML mappings, lists, strings, numbers, booleans and null", n.Type())
	}
	return nil
}

func writePairs(name string, b *bytes.Buffer, pairs []*ast.MappingValueNode, depth int) error {
	b.WriteByte('{')
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte(',')
		}
		var key string
		switch k := p.Key.(type) {
		case *ast.StringNode:
			key = k.Value
		case ast.ScalarNode:
			key = fmt.Sprint(k.GetValue())
		default:
			e := &Error{File: name, Message: "a key of a value must be a string"}
			if tk := p.Key.GetToken(); tk != nil && tk.Position != nil {
				e.Line, e.Column = tk.Position.Line, tk.Position.Column
			}
			return e
		}
		j, _ := json.Marshal(key)
		b.Write(j)
		b.WriteByte(':')
		if err := writeJSON(name, b, p.Value, depth+1); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// Unmarshal reads data, YAML or JSON, into v (a *File, or a struct that
// holds one), refusing unknown fields, duplicate keys, values of the wrong
// type (a quoted "1" where a number belongs, 1.5 where a whole number
// does), a second document after ---, and lists longer than a document
// takes (the limits of the rollout package), each as an *Error with its line in the file name.
//
// Its cost is bounded by the size of data, whatever it holds: a text of
// more than MaxStructure structural characters (see structure), anchors,
// aliases, tags, and nesting deeper than maxNesting are refused before the
// YAML parser sees them, and a list over its limit is refused before it is
// decoded.
func Unmarshal(name string, data []byte, v any) error {
	_, err := unmarshal(name, data, v, MaxStructure)
	return err
}

// MaxStructure bounds structure(data) for Unmarshal, which reads request
// bodies: the YAML parser takes some microseconds and a kilobyte for each
// token, so that a megabyte of brackets would cost seconds. A document of
// a megabyte written in block style, as an export writes it, has about a
// fifth of this; JSON (read by encoding/json, not by this package) has no
// such bound.
const MaxStructure = 256 << 10

// maxFileStructure bounds structure(data) for Parse, which reads a file of
// up to document.MaxBytes: the same density as MaxStructure.
const maxFileStructure = MaxStructure * (document.MaxBytes >> 20)

// structure returns how many characters of data may start or end a token
// of YAML: flow indicators ([]{},:), "- " entries, quotes, and the
// characters of anchors, aliases, tags, comments, block scalars and
// directives, and line ends. The YAML parser makes at most about twice as
// many tokens of data.
func structure(data []byte) int {
	n := 0
	for i, c := range data {
		switch c {
		case '[', ']', '{', '}', ',', ':', '?', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', '\n':
			n++
		case '-':
			if i+1 == len(data) || data[i+1] == ' ' || data[i+1] == '\n' || data[i+1] == '\r' || data[i+1] == '\t' || data[i+1] == '-' {
				n++
			}
		}
	}
	return n
}

// unmarshal is Unmarshal with a bound on structure(data); it returns the
// parsed file for atPath.
func unmarshal(name string, data []byte, v any, maxStructure int) (*ast.File, error) {
	if n := structure(data); n > maxStructure {
		return nil, &Error{File: name, Message: fmt.Sprintf("the YAML is too dense to read: it has %d brackets, commas, colons, quotes, entries and lines, more than %d; send it as JSON, or split it", n, maxStructure)}
	}
	tokens := lexer.Tokenize(string(data))
	if err := scan(name, data, tokens); err != nil {
		return nil, err
	}
	file, err := parser.Parse(tokens, 0)
	if err != nil {
		return nil, fileError(name, data, err)
	}
	var body ast.Node
	for _, doc := range file.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body != nil {
			return nil, nodeError(name, data, doc.Body, "a second document (after ---) is not taken: send one document")
		}
		body = doc.Body
	}
	if body == nil {
		return file, nil
	}
	w := walker{name: name, data: data}
	if err := w.walk(body, reflect.TypeOf(v), "", ""); err != nil {
		return nil, err
	}
	if err := yaml.NodeToValue(body, v, yaml.Strict(), yaml.DisallowUnknownField()); err != nil {
		return nil, fileError(name, data, err)
	}
	return file, nil
}

// limits are the most entries a list (or mapping) of a document may have,
// by its place in the document: "features", "features.buckets", … A list
// over its limit is refused before it is decoded.
var limits = map[string]int{
	"features":                       document.MaxFeatures,
	"features.buckets":               feature.MaxBuckets,
	"features.overrides":             feature.MaxOverrides,
	"features.rules":                 feature.MaxRules,
	"features.rules.conditions":      feature.MaxConditions,
	"features.rules.conditions.any":  feature.MaxConditions,
	"segments.conditions.any":        feature.MaxConditions,
	"features.tags":                  feature.MaxTags,
	"features.prerequisites":         feature.MaxPrerequisites,
	"features.prerequisites.buckets": feature.MaxBuckets,
	"segments":                       feature.MaxSegments,
	"segments.conditions":            feature.MaxConditions,
}

// tooMany is the message of a list at place (as features[2].rules) of a
// document with more entries than limits allow.
func tooMany(place string, limit int) string {
	return fmt.Sprintf("%s has more than %d entries: a document takes at most %d", place, limit, limit)
}

var (
	fileType = reflect.TypeFor[File]()
	nodeType = reflect.TypeFor[ast.Node]()
)

// walker checks a document's nodes against the Go type they will be
// decoded into: the length of lists (Limits) and the type of scalars.
type walker struct {
	name string
	data []byte
}

// walk checks n, to be decoded into a value of type t; path is the place
// of n in the document without indices (a key of Limits), place with them.
// What the decoder refuses anyway (unknown fields, mappings where a list
// belongs) is left to it.
func (w *walker) walk(n ast.Node, t reflect.Type, path, place string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nodeType || n == nil {
		return nil
	}
	if _, ok := n.(*ast.NullNode); ok {
		return nil
	}
	if t == fileType {
		path, place = "", ""
	}
	join := func(a, b string) string {
		if a == "" {
			return b
		}
		return a + "." + b
	}
	switch t.Kind() {
	case reflect.Struct:
		pairs := mappingPairs(n)
		for _, p := range pairs {
			k, ok := p.Key.(ast.ScalarNode)
			if !ok {
				continue
			}
			key := fmt.Sprint(k.GetValue())
			f, ok := fieldOf(t, key)
			if !ok {
				continue
			}
			if err := w.walk(p.Value, f.Type, join(path, key), join(place, key)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			return nil
		}
		if limit, ok := limits[path]; ok && len(seq.Values) > limit {
			return overLimit(nodeError(w.name, w.data, seq.Values[limit], tooMany(place, limit)))
		}
		for i, v := range seq.Values {
			if err := w.walk(v, t.Elem(), path, fmt.Sprintf("%s[%d]", place, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		pairs := mappingPairs(n)
		if limit, ok := limits[path]; ok && len(pairs) > limit {
			return overLimit(nodeError(w.name, w.data, pairs[limit], tooMany(place, limit)))
		}
		for _, p := range pairs {
			if err := w.walk(p.Value, t.Elem(), path, place); err != nil {
				return err
			}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch n := n.(type) {
		case *ast.IntegerNode:
		case *ast.FloatNode:
			return nodeError(w.name, w.data, n, fmt.Sprintf("wrong type: %s, with a fraction, where a whole number is expected", abbreviate(n.Token.Value)))
		default:
			return nodeError(w.name, w.data, n, fmt.Sprintf("wrong type: %s where a whole number is expected", scalarKind(n)))
		}
	case reflect.Float32, reflect.Float64:
		switch n := n.(type) {
		case *ast.IntegerNode, *ast.FloatNode:
		case *ast.StringNode:
			// A plain 1e3 is a number, as in JSON; a quoted "1" is not.
			if _, err := strconv.ParseFloat(n.Value, 64); err != nil || n.Token.Type != token.StringType {
				return nodeError(w.name, w.data, n, fmt.Sprintf("wrong type: %s where a number is expected", scalarKind(n)))
			}
		default:
			return nodeError(w.name, w.data, n, fmt.Sprintf("wrong type: %s where a number is expected", scalarKind(n)))
		}
	case reflect.Bool:
		if _, ok := n.(*ast.BoolNode); !ok {
			return nodeError(w.name, w.data, n, fmt.Sprintf("wrong type: %s where true or false is expected", scalarKind(n)))
		}
	}
	return nil
}

func overLimit(e *Error) *Error {
	e.OverLimit = true
	return e
}

// fieldOf returns the field of struct type t that the key names, as the
// YAML decoder finds it: by its yaml tag, its json tag, or its name in
// lower case.
func fieldOf(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "" {
			tag = f.Tag.Get("json")
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// scalarKind names what n is, for an error: "a quoted string (\"1\")".
func scalarKind(n ast.Node) string {
	switch n := n.(type) {
	case *ast.StringNode:
		if n.Token.Type == token.DoubleQuoteType || n.Token.Type == token.SingleQuoteType {
			return fmt.Sprintf("a quoted string (%q)", abbreviate(n.Value))
		}
		return fmt.Sprintf("a string (%q)", abbreviate(n.Value))
	case *ast.BoolNode:
		return "true or false"
	case *ast.IntegerNode, *ast.FloatNode:
		return "a number"
	case *ast.SequenceNode:
		return "a list"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.LiteralNode:
		return "a block of text"
	}
	return "a " + n.Type().String()
}

// nodeError returns an *Error with message at the line of n in data (of
// its first key, for a mapping).
func nodeError(name string, data []byte, n ast.Node, message string) *Error {
	e := &Error{File: name, Message: message}
	switch m := n.(type) {
	case *ast.MappingNode:
		if len(m.Values) > 0 {
			n = m.Values[0].Key
		}
	case *ast.MappingValueNode:
		n = m.Key
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		e.Line, e.Column = tk.Position.Line, tk.Position.Column
		e.Source = excerpt(data, e.Line, e.Column)
	}
	return e
}

// maxNesting bounds how deep flow collections ([…], {…}) nest, and
// maxColumn where a block-style token may start (block nesting goes one
// column deeper per level): a document's own structure nests 5 deep and a
// bucket's value at most feature.MaxValueDepth.
const (
	maxNesting = feature.MaxValueDepth + 16
	maxColumn  = 1200
)

// scan refuses what the document format does not take, from the tokens
// alone: anchors and aliases (whose expansion can be exponential), tags,
// complex keys, a bracket that closes nothing, and nesting beyond
// maxNesting or maxColumn.
func scan(name string, data []byte, tokens token.Tokens) error {
	depth, line := 0, 0
	for _, tk := range tokens {
		// Whether tk is the first token of its line: block nesting shows in
		// its column, and in the columns of entries ("- - - x").
		first := tk.Position != nil && tk.Position.Line != line
		if tk.Position != nil {
			line = tk.Position.Line
		}
		refuse := ""
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			if depth++; depth > maxNesting {
				refuse = fmt.Sprintf("collections nest more than %d deep", maxNesting)
			}
		case token.SequenceEndType, token.MappingEndType:
			if depth--; depth < 0 {
				refuse = fmt.Sprintf("%s closes nothing: a bracket that is not opened", tk.Value)
			}
		case token.AnchorType, token.AliasType:
			refuse = "anchors (&) and aliases (*) are not taken in a document: write each value out"
		case token.TagType:
			refuse = "tags (!) are not taken in a document"
		case token.MappingKeyType:
			refuse = "complex keys (?) are not taken in a document"
		case token.CommentType:
		default:
			if depth == 0 && (first || tk.Type == token.SequenceEntryType) && tk.Position.Column > maxColumn {
				refuse = fmt.Sprintf("blocks nest too deep (a line indented beyond column %d)", maxColumn)
			}
		}
		if refuse != "" {
			e := &Error{File: name, Message: refuse}
			if tk.Position != nil {
				e.Line, e.Column = tk.Position.Line, tk.Position.Column
				e.Source = excerpt(data, e.Line, e.Column)
			}
			return e
		}
	}
	return nil
}

var typeError = regexp.MustCompile(`^cannot unmarshal (.+?) into Go (?:struct field \S+|value) of type (\S+)$`)

// typeNames are the Go types of a document as a file's author knows them.
var typeNames = map[string]string{
	"bool": "true or false", "float64": "a number", "int": "a whole number", "string": "a string",
	"*bool": "true or false", "*float64": "a number", "*int": "a whole number",
}

// quoted matches a quoted key or value in the parser's messages, to cut.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// maxQuoted is how many bytes of a key or value an error message quotes.
const maxQuoted = 64

// abbreviate returns s cut to maxQuoted bytes, with an ellipsis.
func abbreviate(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return strings.ToValidUTF8(s[:maxQuoted], "") + "…"
}

// fileError returns the parser's err as an *Error with its line in data.
// The parser's own rendering of the source is not used: it costs the
// square of a long line.
func fileError(name string, data []byte, err error) error {
	ye, ok := errors.AsType[yamlError](err)
	if !ok {
		return &Error{File: name, Message: err.Error()}
	}
	msg := ye.GetMessage()
	if m := typeError.FindStringSubmatch(msg); m != nil {
		want, ok := typeNames[m[2]]
		switch {
		case ok:
		case strings.HasPrefix(m[2], "[]"):
			want = "a list"
		case strings.HasPrefix(m[2], "map["), strings.HasPrefix(m[2], "document."):
			want = "a mapping"
		default:
			want = m[2]
		}
		given := m[1]
		switch {
		case strings.HasPrefix(given, "[]"):
			given = "a list"
		case strings.HasPrefix(given, "map["):
			given = "a mapping"
		}
		msg = fmt.Sprintf("wrong type: %s where %s is expected", given, want)
	}
	msg = quoted.ReplaceAllStringFunc(msg, func(q string) string {
		if len(q) <= maxQuoted+2 {
			return q
		}
		return `"` + abbreviate(q[1:len(q)-1]) + `"`
	})
	e := &Error{File: name, Message: abbreviateMessage(msg)}
	if tk := ye.GetToken(); tk != nil && tk.Position != nil {
		e.Line, e.Column = tk.Position.Line, tk.Position.Column
		e.Source = excerpt(data, e.Line, e.Column)
	}
	return e
}

// maxMessage bounds a parser's message (which may quote the source).
const maxMessage = 512

func abbreviateMessage(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return strings.ToValidUTF8(s[:maxMessage], "") + "…"
}

// Excerpts show the lines around an error: excerptLines before and after
// the line, each cut to excerptWidth bytes around the column.
const (
	excerptLines = 3
	excerptWidth = 120
)

// excerpt returns the lines of data around line (from 1), the line marked
// with ">" and the column (from 1, in characters) with "^" under it, in
// the layout of the YAML parser's own excerpts; each line is cut to
// excerptWidth bytes around the column, so that its cost is linear in
// data whatever its lines' length.
func excerpt(data []byte, line, column int) string {
	if line <= 0 {
		return ""
	}
	first := max(1, line-excerptLines)
	var b strings.Builder
	for n, start := 1, 0; n <= line+excerptLines; n++ {
		end := bytes.IndexByte(data[start:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += start
		}
		if n >= first {
			text, caret := cutLine(bytes.TrimRight(data[start:end], "\r"), column)
			marker := "  "
			if n == line {
				marker = "> "
			}
			prefix := fmt.Sprintf("%s%2d | ", marker, n)
			b.WriteString(prefix + text + "\n")
			if n == line {
				b.WriteString(strings.Repeat(" ", len(prefix)+caret) + "^\n")
			}
		}
		if end == len(data) {
			break
		}
		start = end + 1
	}
	return b.String()
}

// cutLine returns line cut to about excerptWidth bytes around column
// (from 1, in characters), with an ellipsis where it was cut, and how many
// characters of it come before the column.
func cutLine(line []byte, column int) (string, int) {
	// The byte offset of the column.
	at, i := 0, 1
	for at < len(line) && i < column {
		_, size := utf8.DecodeRune(line[at:])
		at += size
		i++
	}
	from, to := 0, len(line)
	if len(line) > excerptWidth {
		from = max(0, min(at-excerptWidth/2, len(line)-excerptWidth))
		to = from + excerptWidth
		for from > 0 && !utf8.RuneStart(line[from]) {
			from--
		}
		for to < len(line) && !utf8.RuneStart(line[to]) {
			to++
		}
	}
	text := strings.ToValidUTF8(string(line[from:to]), "")
	caret := utf8.RuneCount(line[from:at]) + max(0, column-i) // past the line's end
	if from > 0 {
		text = "… " + text
		caret += 2
	}
	if to < len(line) {
		text += " …"
	}
	return text, caret
}

// atPath returns err, a document's error, with the line of its path in
// file.
func atPath(name string, file *ast.File, err error) error {
	de, ok := errors.AsType[*document.Error](err)
	if !ok {
		return &Error{File: name, Message: feature.ErrorMessage(err)}
	}
	e := &Error{File: name, Message: de.Err.Message}
	p, perr := yaml.PathString(de.Path)
	if perr != nil || file == nil {
		return e
	}
	for path := de.Path; ; {
		node, ferr := p.FilterFile(file)
		if ferr == nil && node != nil {
			if tk := node.GetToken(); tk != nil && tk.Position != nil {
				e.Line, e.Column = tk.Position.Line, tk.Position.Column
				return e
			}
		}
		// Not in the file (a field left out): the line of what holds it.
		i := strings.LastIndexAny(path, ".[")
		if i <= 1 {
			return e
		}
		path = path[:i]
		if p, perr = yaml.PathString(path); perr != nil {
			return e
		}
	}
}

// Formats of a file.
const (
	YAML = "yaml"
	JSON = "json"
)

// Marshal writes d in format (YAML or JSON).
func Marshal(d document.Document, format string) ([]byte, error) {
	switch format {
	case JSON:
		b, err := json.MarshalIndent(d, "", "  ")
		return append(b, '\n'), err
	case YAML:
		return yaml.MarshalWithOptions(d, yaml.IndentSequence(true),
			yaml.CustomMarshaler[json.RawMessage](func(v json.RawMessage) ([]byte, error) { return v, nil }))
	}
	return nil, fmt.Errorf("format %q is unknown: give %s or %s", format, YAML, JSON)
}

// ServerError places an error the server gave for the document in data
// (such as "features[0].rules[1].conditions[0]: in_segment names …", which
// only the server can see) at its line in the file name. It returns nil
// when message does not start with a place in the document.
func ServerError(name string, data []byte, message string) error {
	path, _, ok := strings.Cut(message, ": ")
	if !ok || !(strings.HasPrefix(path, "features[") || strings.HasPrefix(path, "segments[")) || strings.ContainsAny(path, " \n") {
		return nil
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		file = nil // the error without its line
	}
	return atPath(name, file, &document.Error{Path: "$." + path, Err: &feature.Error{Code: feature.EInvalid, Message: message}})
}

// mappingPairs returns the key-value pairs of n, a mapping (none when n is
// not one).
func mappingPairs(n ast.Node) []*ast.MappingValueNode {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}
	}
	return nil
}
