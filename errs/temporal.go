package errs

import (
	"errors"

	"go.temporal.io/sdk/temporal"
)

// ToTemporal turns our error into a Temporal application error whose type
// is the kind, non-retryable for final kinds, so a workflow can tell them
// apart and Temporal does not retry what cannot succeed. Other errors, and
// errors that already are Temporal's, pass through.
func ToTemporal(err error) error {
	var e *Error
	if err == nil || !errors.As(err, &e) {
		return err
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return err
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), string(e.Kind),
		temporal.ApplicationErrorOptions{NonRetryable: !e.Kind.Retryable(), Cause: e.Err})
}

// FromTemporal returns the kind a Temporal error carries as its application
// error type, or KindOf(err) when it carries none.
func FromTemporal(err error) Kind {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() != "" {
		return Kind(app.Type())
	}
	return KindOf(err)
}
