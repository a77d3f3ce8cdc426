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
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/rollout/rollout/rollout"
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
	var d rollout.Document
	if len(data) > rollout.MaxDocumentBytes {
		return d, TooLarge(name, int64(len(data)))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return d, &Error{File: name, Message: `the file is empty: a document is "features: [...]"`}
	}
	if err := Unmarshal(name, data, &d); err != nil {
		return rollout.Document{}, err
	}
	if err := d.Validate(); err != nil {
		return rollout.Document{}, atPath(name, data, err)
	}
	return d, nil
}

// Unmarshal reads data, YAML or JSON, into v, refusing unknown fields,
// duplicate keys and values of the wrong type, each as an *Error with its
// line in the file name. JSON values (json.RawMessage) may be written as
// YAML.
func Unmarshal(name string, data []byte, v any) error {
	err := yaml.UnmarshalWithOptions(data, v, yaml.Strict(), yaml.DisallowUnknownField(),
		yaml.CustomUnmarshaler[json.RawMessage](rawJSON))
	if err != nil {
		return fileError(name, err)
	}
	return nil
}

// TooLarge is the error of a file of size bytes, more than
// rollout.MaxDocumentBytes.
func TooLarge(name string, size int64) error {
	return &Error{File: name, Message: fmt.Sprintf("the file is %d bytes, more than a document may have (%d bytes, %d MB): split it into several files", size, rollout.MaxDocumentBytes, rollout.MaxDocumentBytes>>20)}
}

// rawJSON reads a JSON value of the document (a bucket's value, a
// condition's): written as JSON (flow style) it is kept as written,
// compacted; as YAML, converted.
func rawJSON(dst *json.RawMessage, b []byte) error {
	b = bytes.TrimSpace(b)
	if json.Valid(b) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, b); err != nil {
			return err
		}
		*dst = buf.Bytes()
		return nil
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, j); err != nil {
		return fmt.Errorf("the value is not JSON: %w", err)
	}
	*dst = buf.Bytes()
	return nil
}

var typeError = regexp.MustCompile(`^cannot unmarshal (\S+) into Go (?:struct field \S+|value) of type (\S+)$`)

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
		msg = fmt.Sprintf("wrong type: %s where %s is expected", m[1], want)
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
		return &Error{File: name, Message: rollout.ErrorMessage(err)}
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
