// Package docfile reads and writes documents of features (rollout.Document)
// as files, YAML or JSON: one schema, read by one YAML parser (JSON is
// YAML), so that every error in a file, of syntax, of type or of sense,
// says the line it is on.
package docfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/rollout/rollout/rollout"
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
// in errors): it refuses a file larger than rollout.MaxDocumentBytes,
// unknown fields, duplicate keys, values of the wrong type, and whatever
// rollout.Document.Validate refuses, each as an *Error with its line.
func Parse(name string, data []byte) (rollout.Document, error) {
	if len(data) > rollout.MaxDocumentBytes {
		return rollout.Document{}, TooLarge(name, int64(len(data)))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return rollout.Document{}, &Error{File: name, Message: `the file is empty: a document is "features: [...]"`}
	}
	var f File
	if err := Unmarshal(name, data, &f); err != nil {
		return rollout.Document{}, err
	}
	d, err := f.Document(name)
	if err != nil {
		return rollout.Document{}, err
	}
	if err := d.Validate(); err != nil {
		return rollout.Document{}, atPath(name, data, err)
	}
	return d, nil
}

// TooLarge is the error of a file of size bytes, more than
// rollout.MaxDocumentBytes.
func TooLarge(name string, size int64) error {
	return &Error{File: name, Message: fmt.Sprintf("the file is %d bytes, more than a document may have (%d bytes, %d MB): split it into several files", size, rollout.MaxDocumentBytes, rollout.MaxDocumentBytes>>20)}
}

// File is a document as a file holds it: a rollout.Document whose JSON
// values (buckets' values, conditions' values) are the YAML nodes they
// were written as. Document turns it into one.
type File struct {
	Features []fileFeature `yaml:"features"`
	Segments []fileSegment `yaml:"segments"`
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
	Attribute string   `yaml:"attribute"`
	Op        string   `yaml:"op"`
	Value     ast.Node `yaml:"value"`
}

type fileSegment struct {
	Key         string          `yaml:"key"`
	Description string          `yaml:"description"`
	Conditions  []fileCondition `yaml:"conditions"`
}

// Document returns f as a rollout.Document, its values as JSON; a value
// that JSON cannot hold is an *Error with its line in the file name.
func (f *File) Document(name string) (rollout.Document, error) {
	var d rollout.Document
	if f.Features != nil {
		d.Features = make([]rollout.DocFeature, 0, len(f.Features))
	}
	conditions := func(cs []fileCondition) ([]feature.Condition, error) {
		var out []feature.Condition
		for _, c := range cs {
			v, err := nodeJSON(name, c.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, feature.Condition{Attribute: c.Attribute, Op: c.Op, Value: v})
		}
		return out, nil
	}
	for _, ff := range f.Features {
		df := rollout.DocFeature{
			Key: ff.Key, Description: ff.Description, Enabled: ff.Enabled, Fallback: ff.Fallback, Salt: ff.Salt,
			Tolerance: ff.Tolerance, Overrides: ff.Overrides, BucketBy: ff.BucketBy, Tags: ff.Tags, Owner: ff.Owner,
		}
		for _, b := range ff.Buckets {
			v, err := nodeJSON(name, b.Value)
			if err != nil {
				return rollout.Document{}, err
			}
			df.Buckets = append(df.Buckets, rollout.DocBucket{Name: b.Name, Share: b.Share, Replicas: b.Replicas, Value: v})
		}
		for _, r := range ff.Rules {
			cs, err := conditions(r.Conditions)
			if err != nil {
				return rollout.Document{}, err
			}
			df.Rules = append(df.Rules, feature.Rule{Name: r.Name, Conditions: cs, Serve: r.Serve})
		}
		d.Features = append(d.Features, df)
	}
	if f.Segments != nil {
		d.Segments = []rollout.DocSegment{}
	}
	for _, s := range f.Segments {
		cs, err := conditions(s.Conditions)
		if err != nil {
			return rollout.Document{}, err
		}
		d.Segments = append(d.Segments, rollout.DocSegment{Key: s.Key, Description: s.Description, Conditions: cs})
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
// holds one), refusing unknown fields, duplicate keys and values of the
// wrong type, each as an *Error with its line in the file name. Anchors,
// aliases, tags and nesting deeper than maxNesting are refused before
// anything is decoded, so that no file makes its decoding take more than
// its size's worth of memory and time.
func Unmarshal(name string, data []byte, v any) error {
	if err := scan(name, data); err != nil {
		return err
	}
	if err := yaml.UnmarshalWithOptions(data, v, yaml.Strict(), yaml.DisallowUnknownField()); err != nil {
		return fileError(name, err)
	}
	return nil
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
// complex keys, and nesting beyond maxNesting or maxColumn.
func scan(name string, data []byte) error {
	depth := 0
	for _, tk := range lexer.Tokenize(string(data)) {
		refuse := ""
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			if depth++; depth > maxNesting {
				refuse = fmt.Sprintf("collections nest more than %d deep", maxNesting)
			}
		case token.SequenceEndType, token.MappingEndType:
			depth--
		case token.AnchorType, token.AliasType:
			refuse = "anchors (&) and aliases (*) are not taken in a document: write each value out"
		case token.TagType:
			refuse = "tags (!) are not taken in a document"
		case token.MappingKeyType:
			refuse = "complex keys (?) are not taken in a document"
		case token.CommentType:
		default:
			if depth == 0 && tk.Position != nil && tk.Position.Column > maxColumn {
				refuse = fmt.Sprintf("blocks nest too deep (a line indented beyond column %d)", maxColumn)
			}
		}
		if refuse != "" {
			e := &Error{File: name, Message: refuse}
			if tk.Position != nil {
				e.Line, e.Column = tk.Position.Line, tk.Position.Column
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

// fileError returns the parser's err as an *Error with its line.
func fileError(name string, err error) error {
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
		case strings.HasPrefix(m[2], "map["), strings.HasPrefix(m[2], "rollout."):
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
	e := &Error{File: name, Message: msg, Source: sourceOf(err)}
	if tk := ye.GetToken(); tk != nil && tk.Position != nil {
		e.Line, e.Column = tk.Position.Line, tk.Position.Column
	}
	return e
}

// sourceOf returns the lines the parser shows around err.
func sourceOf(err error) string {
	text := yaml.FormatError(err, false, true)
	if _, rest, ok := strings.Cut(text, "\n"); ok {
		return rest
	}
	return ""
}

// atPath returns err, a document's error, with the line of its path in the
// file data.
func atPath(name string, data []byte, err error) error {
	de, ok := errors.AsType[*rollout.DocumentError](err)
	if !ok {
		return &Error{File: name, Message: feature.ErrorMessage(err)}
	}
	e := &Error{File: name, Message: de.Err.Message}
	p, perr := yaml.PathString(de.Path)
	if perr != nil {
		return e
	}
	file, perr := parser.ParseBytes(data, 0)
	if perr != nil {
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
func Marshal(d rollout.Document, format string) ([]byte, error) {
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
	return atPath(name, data, &rollout.DocumentError{Path: "$." + path, Err: &feature.Error{Code: feature.EInvalid, Message: message}})
}
