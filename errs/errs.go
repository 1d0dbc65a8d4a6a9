// Package errs owns the one error type of better-compute: a kind from the spec
// (NOT_FOUND, INVALID_INPUT, INVALID_STATE, …), the operation that failed, a message
// that tells the operator what to do next, and the cause. The API maps kinds to
// Connect codes (api/errors.go); activities carry them as Temporal application
// error types so workflows can tell retryable from final.
package errs

import (
	"errors"
	"fmt"
)

// Kind is an error code from the spec. The strings are the contract: the CLI
// prints them, the API carries them in error details, Temporal stores them as
// application error types.
type Kind string

const (
	NotFound         Kind = "NOT_FOUND"         // the object does not exist in the caller's tenant
	InvalidInput     Kind = "INVALID_INPUT"     // the request is malformed; Field names what
	InvalidState     Kind = "INVALID_STATE"     // the object's state does not allow the operation
	Unsupported      Kind = "UNSUPPORTED"       // the feature or hardware cannot do this (yet)
	UnverifiedWipe   Kind = "UNVERIFIED_WIPE"   // a release's wipe was not attested by the machine
	DriverError      Kind = "DRIVER_ERROR"      // a BMC, disk or peer answered badly
	BootStalled      Kind = "BOOT_STALLED"      // a machine's ramdisk boot made no progress; the message says where it stopped
	Unauthenticated  Kind = "UNAUTHENTICATED"   // no credential, or a wrong one
	PermissionDenied Kind = "PERMISSION_DENIED" // the credential may not do this
	AlreadyExists    Kind = "ALREADY_EXISTS"    // a unique name or id is taken
	ForbiddenTarget  Kind = "forbidden-target"  // site.httpProxy refused the target
	Unavailable      Kind = "UNAVAILABLE"       // a dependency is down; retry later
	Internal         Kind = "INTERNAL"          // a bug or an unexpected failure
)

// Kinds lists every kind, in the order above.
func Kinds() []Kind {
	return []Kind{NotFound, InvalidInput, InvalidState, Unsupported, UnverifiedWipe, DriverError, BootStalled,
		Unauthenticated, PermissionDenied, AlreadyExists, ForbiddenTarget, Unavailable, Internal}
}

// FinalKinds are the kinds no retry can fix (not Retryable), as Temporal
// application error types: a retry policy's NonRetryableErrorTypes.
func FinalKinds() []string {
	var out []string
	for _, k := range Kinds() {
		if !k.Retryable() {
			out = append(out, string(k))
		}
	}
	return out
}

// Retryable reports whether an activity failing with this kind may be retried.
// Final kinds are non-retryable Temporal application errors.
func (k Kind) Retryable() bool {
	switch k {
	case DriverError, Unavailable, Internal:
		return true
	}
	return false
}

// Error is the one error type.
type Error struct {
	Kind  Kind
	Op    string // what was being done, e.g. "sites.create"
	Field string // for INVALID_INPUT: the offending field, e.g. "policy.hardwareProfile"
	Msg   string // what happened and what to do next
	Err   error  // the cause, if any
	// Reason is a machine-readable detail of the kind for a caller that acts
	// on it (e.g. bmc.ReasonBusy): set where the failure is understood, so no
	// caller reads it from Msg. Error() does not show it.
	Reason string
}

func (e *Error) Error() string {
	s := string(e.Kind)
	if e.Op != "" {
		s = e.Op + ": " + s
	}
	if e.Field != "" {
		s += " " + e.Field
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error of kind k with a formatted message.
func New(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an error of kind k with cause err.
func Wrap(k Kind, err error, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...), Err: err}
}

// Invalid returns an INVALID_INPUT error naming field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Kind: InvalidInput, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// WithOp sets the operation on a copy of e.
func (e *Error) WithOp(op string) *Error {
	c := *e
	c.Op = op
	return &c
}

// WithMsg sets the message on a copy of e.
func (e *Error) WithMsg(msg string) *Error {
	c := *e
	c.Msg = msg
	return &c
}

// WithReason sets the reason on a copy of e.
func (e *Error) WithReason(reason string) *Error {
	c := *e
	c.Reason = reason
	return &c
}

// ReasonOf returns the first reason set along err's chain of our errors, ""
// when none is: a layer that wraps a driver's error keeps its reason.
func ReasonOf(err error) string {
	var e *Error
	for errors.As(err, &e) {
		if e.Reason != "" {
			return e.Reason
		}
		err = e.Err
	}
	return ""
}

// Own returns err as our own error, with op if it names none, when it is
// one: a driver passes its own errors through and classifies the rest.
func Own(err error, op string) (*Error, bool) {
	var e *Error
	if !errors.As(err, &e) {
		return nil, false
	}
	if e.Op == "" {
		return e.WithOp(op), true
	}
	return e, true
}

// KindOf returns the kind of err, or Internal for an error that is not ours,
// and "" for nil.
func KindOf(err error) Kind {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// Is reports whether err has kind k.
func Is(err error, k Kind) bool { return err != nil && KindOf(err) == k }
