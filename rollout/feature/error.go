package feature

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Error codes. The API maps each to one HTTP status.
const (
	EInvalid      = "invalid"             // the request is well formed but not acceptable
	ENotFound     = "not_found"           // no such feature, bucket or version
	EConflict     = "conflict"            // the change contradicts the current state
	EPrecondition = "precondition_failed" // If-Match named a version the feature has moved on from
	EChurn        = "max_churn_exceeded"  // the change would move more users than allowed
	EUnavailable  = "unavailable"         // the store cannot take writes right now
	EForbidden    = "forbidden"           // the actor's role may not make this change (see Settings)
	EInternal     = "internal"
)

// CheckMaxChurn refuses, with EInvalid, a max_churn guard (the fraction
// of users a change may move, over which it is refused with EChurn)
// outside 0 to 1.
func CheckMaxChurn(m float64) error {
	if math.IsNaN(m) || m < 0 || m > 1 {
		return Errorf(EInvalid, "max_churn %v is out of range: give a fraction of users from 0 to 1 (0.25 is 25 %%)", m)
	}
	return nil
}

// Error is the domain's one error type: a code, a message for the user that
// says what was wrong and how to fix it, the field of a configuration it is
// about, and for EChurn the report that was refused.
type Error struct {
	Code    string
	Message string
	// Field is where in a configuration (a feature, a segment, a
	// document) the error is, for an error about one place: a path of
	// JSON names, list indexes and quoted map keys, such as
	// "buckets[1].name", "rules[0].conditions[1].value" or
	// `overrides["u1"]`. Message then starts with it and ": ". "" for
	// an error about no one place.
	Field  string
	Report *Report
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Within returns e placed within parent, the field that holds what e is
// about: a copy whose Field is parent followed by e's Field (parent alone
// when e has none), and whose Message starts with that path in place of
// e's. A validator places the errors of a configuration's parts so
// ("rules[0]" for a rule's), and a document those of its features
// ("features[2]"). Within("") returns e.
func (e *Error) Within(parent string) *Error {
	if parent == "" {
		return e
	}
	c := *e
	c.Field = joinField(parent, e.Field)
	c.Message = c.Field + ": " + e.detail()
	return &c
}

// detail is e's message without the field it starts with.
func (e *Error) detail() string {
	if e.Field == "" {
		return e.Message
	}
	return strings.TrimPrefix(e.Message, e.Field+": ")
}

// invalidAt returns an EInvalid *Error about field (see Error.Field), its
// message the field and the formatted detail.
func invalidAt(field, format string, args ...any) *Error {
	return Errorf(EInvalid, format, args...).Within(field)
}

// within places err, an *Error, within parent (see Error.Within); it
// returns any other error as it is.
func within(err error, parent string) error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Within(parent)
	}
	return err
}

// about places err, an *Error about a part of a configuration, within
// parent (see Error.Within), its detail starting with what, which names
// the part's holder for a reader (`rule "staff"`, `segment "beta"`); it
// returns any other error as it is.
func about(err error, what, parent string) error {
	e, ok := errors.AsType[*Error](err)
	if !ok {
		return err
	}
	c := *e
	c.Message, c.Field = what+": "+e.detail(), ""
	return c.Within(joinField(parent, e.Field))
}

// joinField is the path of field within parent.
func joinField(parent, field string) string {
	switch {
	case parent == "":
		return field
	case field == "":
		return parent
	case field[0] == '[':
		return parent + field
	}
	return parent + "." + field
}

// ErrorCode returns the code of err if it is, or wraps, an *Error;
// EInternal for any other error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the message of err for its user: the Message of the
// *Error err is or wraps, without its code and without the context or
// cause wrapped around it (a store's driver error, say), which are for the
// logs; the text of any other error; "" for nil.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Message
	}
	return err.Error()
}
