package errs

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/temporal"
)

func TestKindOfAndWrapping(t *testing.T) {
	t.Parallel()
	base := Invalid("policy.hardwareProfile", "not configured")
	wrapped := fmt.Errorf("pools.create: %w", base)
	if got := KindOf(wrapped); got != InvalidInput {
		t.Errorf("KindOf(wrapped) = %s, want INVALID_INPUT", got)
	}
	if got := KindOf(errors.New("boom")); got != Internal {
		t.Errorf("KindOf(plain) = %s, want INTERNAL", got)
	}
	if got := KindOf(nil); got != "" {
		t.Errorf("KindOf(nil) = %q, want empty", got)
	}
	if got, want := base.Error(), "INVALID_INPUT policy.hardwareProfile: not configured"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestToTemporal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err          error
		kind         Kind
		nonRetryable bool
	}{
		{New(UnverifiedWipe, "disk d2 not read back"), UnverifiedWipe, true},
		{New(InvalidState, "busy"), InvalidState, true},
		{New(DriverError, "BMC 500"), DriverError, false},
		{New(Unavailable, "down"), Unavailable, false},
	} {
		got := ToTemporal(tc.err)
		var app *temporal.ApplicationError
		if !errors.As(got, &app) || app.Type() != string(tc.kind) || app.NonRetryable() != tc.nonRetryable {
			t.Errorf("ToTemporal(%v) = %v, want type %s nonRetryable %v", tc.err, got, tc.kind, tc.nonRetryable)
		}
		if FromTemporal(got) != tc.kind {
			t.Errorf("FromTemporal(ToTemporal(%v)) = %s, want %s", tc.err, FromTemporal(got), tc.kind)
		}
	}
	plain := errors.New("plain")
	if ToTemporal(plain) != plain || ToTemporal(nil) != nil {
		t.Errorf("ToTemporal passes other errors through unchanged")
	}
}

func TestFromCode(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]Kind{"not_found": NotFound, "invalid_argument": InvalidInput,
		"resource_exhausted": InvalidInput, "failed_precondition": InvalidState, "unimplemented": Unsupported,
		"unauthenticated": Unauthenticated, "permission_denied": PermissionDenied, "already_exists": AlreadyExists,
		"unavailable": Unavailable, "data_loss": Internal, "": Internal} {
		if got := FromCode(code); got != want {
			t.Errorf("FromCode(%q) = %s, want %s", code, got, want)
		}
	}
}

func TestFinalKinds(t *testing.T) {
	t.Parallel()
	want := []string{"NOT_FOUND", "INVALID_INPUT", "INVALID_STATE", "UNSUPPORTED", "UNVERIFIED_WIPE", "BOOT_STALLED",
		"UNAUTHENTICATED", "PERMISSION_DENIED", "ALREADY_EXISTS", "forbidden-target"}
	if diff := cmp.Diff(want, FinalKinds()); diff != "" {
		t.Errorf("FinalKinds() (-want +got):\n%s", diff)
	}
}

// TestReasonOf: the reason of a driver's error is found under the layers
// that wrap it, ours included, and is not part of the message.
func TestReasonOf(t *testing.T) {
	t.Parallel()
	inner := New(DriverError, "BMC b:623 is silent").WithReason("bmc-unreachable")
	outer := Wrap(DriverError, fmt.Errorf("power: %w", inner), "power.setPower")
	for _, tt := range []struct {
		err  error
		want string
	}{{inner, "bmc-unreachable"}, {outer, "bmc-unreachable"}, {New(DriverError, "x"), ""}, {errors.New("x"), ""}, {nil, ""}} {
		if got := ReasonOf(tt.err); got != tt.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	if got, want := inner.Error(), "DRIVER_ERROR: BMC b:623 is silent"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
