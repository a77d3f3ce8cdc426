package feature

import (
	"errors"
	"fmt"
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

// Error is the domain's one error type: a code, a message for the user that
// says what was wrong and how to fix it, and for EChurn the report that was
// refused.
type Error struct {
	Code    string
	Message string
	Report  *Report
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
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
