package worker

import (
	"context"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// AttemptReporter learns that an activity runs again, so the command log
// shows the attempt (`commands list`).
type AttemptReporter interface {
	ReportAttempt(ctx context.Context, workflowID, runID, step string, attempt int32) error
}

// attempts reports every attempt after the first before running it. A
// report that fails is logged: it never fails the command itself.
type attempts struct {
	interceptor.WorkerInterceptorBase
	r   AttemptReporter
	log *slog.Logger
}

func (a *attempts) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &attemptsActivity{a: a}
	i.Next = next
	return i
}

type attemptsActivity struct {
	interceptor.ActivityInboundInterceptorBase
	a *attempts
}

func (i *attemptsActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	if info.Attempt > 1 {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := i.a.r.ReportAttempt(rctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID, info.Attempt)
		cancel()
		if err != nil {
			i.a.log.Warn("could not record the attempt", "step", info.ActivityID, "attempt", info.Attempt, "err", err)
		}
	}
	return i.Next.ExecuteActivity(ctx, in)
}
