package steps

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk"
)

// NotReadyType is the Temporal error type of a step that said NotReady: the
// activity is retried after the delay it asked for, until the step's
// timeout (the workflow's ScheduleToClose).
const NotReadyType = "NOT_READY"

// Result is what a step's Run returned as its activity returns it:
// NotReady becomes a retry after its delay; any other failure carries its
// errs kind and is final when the kind is, or when the step is not
// RetrySafe, so Temporal never runs such a step again by itself.
func Result(s sdk.Step, out sdk.Values, err error) (sdk.Values, error) {
	if err == nil {
		return out, nil
	}
	if d, ok := sdk.IsNotReady(err); ok {
		return nil, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("%s: %v", s.ID, err), NotReadyType,
			temporal.ApplicationErrorOptions{NextRetryDelay: d})
	}
	k := errs.KindOf(err)
	return nil, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("%s: %v", s.ID, err), string(k),
		temporal.ApplicationErrorOptions{NonRetryable: !k.Retryable() || !s.RetrySafe, Cause: err})
}

// Run runs s.Run and returns what its activity returns (Result). A panic in
// Run is an INTERNAL failure of the step like any other, final when the
// step is not RetrySafe: Temporal retries an activity's panic.
func Run(ctx context.Context, s sdk.Step, c *sdk.Context, in sdk.Values) (out sdk.Values, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = Result(s, nil, errs.New(errs.Internal, "%s panicked: %v", s.ID, p))
		}
	}()
	out, err = s.Run(ctx, c, in)
	return Result(s, out, err)
}
